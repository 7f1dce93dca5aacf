-- retain: the maintenance sweep of retention (see kue_core/features/retention.py). Finished jobs that no
-- script of ours saw finish (a Node Kue worker's) are put in <p>:finished:<state>, at the time
-- they were last updated; then the jobs past the retention in force are removed, as the
-- finishing scripts do, but up to ARGV[2] of them.
-- KEYS[1]  <p>:finished:cursor (per state, where the look for those jobs goes on next time)
-- ARGV[1]  prefix   ARGV[2] most jobs to look at, and to remove, per state
-- Returns  {found, removed}: jobs newly put in the finished sets, and jobs removed.
-- Events   remove [type] per job removed.
-- Errors   KUE_INVALID for malformed arguments.
-- Uses     lib/base (now_ms), lib/keys (k_state, k_finished, k_job), lib/members (zid_id),
--          lib/retention (retire)
local p, limit = ARGV[1], tonumber(ARGV[2])
if not limit or limit < 1 then return redis.error_reply('KUE_INVALID retain takes a limit') end
local now = now_ms()
local found, removed = 0, 0
for _, state in ipairs({ 'complete', 'failed' }) do
  local all, finished = k_state(p, state), k_finished(p, state)
  if redis.call('ZCARD', all) > redis.call('ZCARD', finished) then
    local step = redis.call('ZSCAN', all, redis.call('HGET', KEYS[1], state) or '0',
      'COUNT', limit)
    redis.call('HSET', KEYS[1], state, step[1])
    for j = 1, #step[2], 2 do
      local m = step[2][j]
      if not redis.call('ZSCORE', finished, m) then
        local at = redis.call('HGET', k_job(p, zid_id(m)), 'updated_at')
        redis.call('ZADD', finished, tonumber(at) or now, m)
        found = found + 1
      end
    end
  end
  removed = removed + retire(p, state, nil, now, limit, true)
end
return { found, removed }

-- promote: move delayed jobs that are due to inactive (Kue's promotion timer, atomically).
-- KEYS[1]  <p>:jobs:delayed
-- ARGV[1]  prefix   ARGV[2] most jobs to move in this call
-- Returns  {moved, next due ms or -1 when nothing is delayed, server time ms}.
-- Events   promotion and enqueue [type] per job moved.
-- Several processes may run it at once: a job is moved once, by whichever call sees it first.
local p, limit = ARGV[1], tonumber(ARGV[2])
if not limit or limit < 1 then return redis.error_reply('KUE_INVALID limit must be positive') end
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
local moved = 0
for _, member in ipairs(due) do
  local id = zid_id(member)
  local key = k_job(p, id)
  local h = redis.call('HMGET', key, 'state', 'type', 'priority')
  if h[1] == 'delayed' then
    index_remove(p, id, h[2], 'delayed')
    redis.call('HSET', key, 'state', 'inactive', 'updated_at', int(now))
    index_add(p, id, h[2], 'inactive', tonumber(h[3]) or 0, 0, 0, now)
    history(p, id, { state = 'inactive', at = now, from = 'delayed' })
    publish(p, id, h[2], 'promotion', '')
    publish(p, id, h[2], 'enqueue', cjson.encode(h[2]))
    moved = moved + 1
  else
    redis.call('ZREM', KEYS[1], member)  -- left by an interrupted client: not delayed
  end
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next_due = -1
if #nxt > 0 then next_due = tonumber(nxt[2]) end
return { moved, next_due, now }

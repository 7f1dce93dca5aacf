-- complete: a worker finished a job; store its result, and optionally claim the next one.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] fencing token   ARGV[4] result (JSON)
-- ARGV[5]  worker id   ARGV[6] lease ms (both '' = claim nothing)
-- Returns  {outcome, next...}: outcome 'complete', or 'refused' when the job is not active
--          under this token (recovered and given to another worker, or moved by hand; nothing
--          is written); then the next job of the same type claimed for this worker, as
--          claim.lua returns it (empty when none or not asked).
-- Events   complete [result]; remove [type] when removeOnComplete, and for each job retention
--          removes; start [type] for the claim; unblocked, then enqueue [type] (or nothing
--          more when delayed), for each job that waited only for this one.
-- The job's unique key is released (until_done, debounce); retention removes at most
-- RETIRE_BATCH older completed jobs (see lib.lua retire).
-- The jobs that depend on it no longer wait for it, and get its result (see lib.lua
-- deps_complete): those that wait for no other are unblocked here, once.
-- The completion counts as an attempt (as in Kue), up to max_attempts and never past it.
local p, id, token, result = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local h = redis.call('HMGET', KEYS[1], 'state', 'lease', 'type', 'priority', 'started_at',
  'removeOnComplete', 'workerId', 'attempts', 'max_attempts', 'unique', 'unique_mode',
  'keep_complete', 'dependents', 'group')
local jtype = h[3]
if not jtype then return { 'refused' } end
local now = now_ms()
local outcome = 'refused'
if h[1] == 'active' and h[2] == token then
  outcome = 'complete'
  local duration = math.max(0, now - (tonumber(h[5]) or now))
  local attempt = next_attempt(h[8], h[9])  -- Kue counts a completion as an attempt
  leave_active(p, id, jtype, h[14])
  release_unique(p, id, h[10], h[11])
  redis.call('INCRBY', k_work_time(p), duration)
  count_outcome(p, jtype, 'complete', now, duration)
  publish(p, id, jtype, 'complete', result)
  if h[13] then deps_complete(p, id, result, now) end
  if h[6] == 'true' then
    delete_job(p, id, jtype, nil)
  else
    redis.call('HSET', KEYS[1], 'state', 'complete', 'result', result, 'duration', int(duration),
      'progress', '100', 'updated_at', int(now), 'attempts', int(attempt))
    index_add(p, id, jtype, 'complete', tonumber(h[4]) or 0, 0, 0, now)
    history(p, id, { state = 'complete', at = now, worker = h[7], attempt = attempt,
      duration = duration })
    retire(p, 'complete', h[12], now, RETIRE_BATCH, h[12] or tonumber(id) % RETIRE_BATCH == 0)
  end
end
local out = claim_after(p, jtype, 5, now)
table.insert(out, 1, outcome)
return out

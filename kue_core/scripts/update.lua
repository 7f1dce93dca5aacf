-- update: rewrite a saved job's data and options (Kue's Job#update); the state is kept.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix      ARGV[2] id
-- ARGV[3]  data (JSON) ARGV[4] priority   ARGV[5] max_attempts
-- ARGV[6]  backoff (JSON, '' = none)      ARGV[7] ttl ms (0 = none)
-- ARGV[8]  removeOnComplete ('1' or '')   ARGV[9] delay ms (0 = none)
-- ARGV[10] due time (ms since the epoch, 0 = none): instead of the delay, due at this time
-- ARGV[11] the search words of the new data ('' = none; see kue_core/features/records.py)
-- ARGV[12] keep_complete   ARGV[13] keep_failed: retention policies ('' = the queue's)
-- Returns  the job's state. A blocked job keeps a due time as it is and a delay in ms for
--          when it is released, as flow.lua saves them.
-- Events   none (re-scoring changes no state).
-- Errors   KUE_NOT_FOUND, KUE_INVALID.
-- Uses     lib/base (now_ms, int, STATES), lib/keys (k_jobs, k_state, k_type_state, k_group),
--          lib/members (zid, state_score), lib/pins (pin_rescore), lib/events (keep_saved),
--          lib/attempts (load_job), lib/records (reword), lib/payloads (stored_name,
--          hold_payload)
local p, id = ARGV[1], ARGV[2]
local priority, ttl, delay = tonumber(ARGV[4]), tonumber(ARGV[7]), tonumber(ARGV[9])
local due_at = tonumber(ARGV[10])
if not priority or not ttl or not delay or not due_at or not tonumber(ARGV[5]) then
  return redis.error_reply('KUE_INVALID update arguments are malformed')
end
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end

local now = now_ms()
local set = {
  'data', ARGV[3], 'priority', int(priority), 'max_attempts', ARGV[5], 'updated_at', int(now),
}
local drop = {}
local function opt(field, value, keep)
  if keep then
    set[#set + 1] = field; set[#set + 1] = value
  else
    drop[#drop + 1] = field
  end
end
opt('backoff', ARGV[6], ARGV[6] ~= '')
opt('ttl', int(ttl), ttl > 0)
opt('removeOnComplete', 'true', ARGV[8] == '1')
opt('keep_complete', ARGV[12], ARGV[12] ~= '')
opt('keep_failed', ARGV[13], ARGV[13] ~= '')
local promote_at = job.promote_at
if delay > 0 or due_at > 0 then
  -- Kue: a delay counts from the last failure, else from creation.
  local at = redis.call('HMGET', KEYS[1], 'failed_at', 'created_at')
  local base = tonumber(at[1]) or tonumber(at[2]) or now
  if due_at > 0 then
    delay = math.max(0, due_at - base)  -- Kue's reading: promote_at = base + delay
  end
  if job.state == 'suspended' then
    promote_at = job.promote_at  -- its wait's deadline stays, whatever the due time (lib/signals.lua)
  elseif due_at > 0 then
    promote_at = due_at
  elseif job.state == 'blocked' then
    promote_at = 0  -- a blocked job's delay counts from its release (see lib/deps.lua unblock)
  else
    promote_at = base + delay
  end
  keep_saved(p, id)
  opt('delay', int(delay), delay > 0)
  opt('promote_at', int(promote_at), true)
end
redis.call('HSET', KEYS[1], unpack(set))
hold_payload(p, KEYS[1], 'data', stored_name(ARGV[3]))  -- the data it replaced: to the trash
if #drop > 0 then redis.call('HDEL', KEYS[1], unpack(drop)) end
reword(p, id, KEYS[1], ARGV[11])

local member = zid(id)
redis.call('ZADD', k_jobs(p), priority, member)
if STATES[job.state] then
  redis.call('ZADD', k_state(p, job.state), state_score(job.state, priority, promote_at, ttl, now), member)
  redis.call('ZADD', k_type_state(p, job.type, job.state), priority, member)
  if job.group and job.state == 'inactive' then
    redis.call('ZADD', k_group(p, job.type, job.group), 'XX', priority, member)
  end
  if job.state == 'pinned' or (job.state == 'inactive' and job.prefer) then
    pin_rescore(p, id, job.type, priority, job.prefer)
  end
end
return job.state

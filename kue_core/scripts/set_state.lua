-- set_state: move a job to another state by hand (Kue's PUT /job/:id/state/:state).
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] new state
-- Returns  the previous state (unchanged when it equals the new one: nothing is written).
-- Events   enqueue [type] when the job moves to inactive; its due time on <p>:promote when
--          it moves to delayed.
-- Errors   KUE_NOT_FOUND; KUE_INVALID for an unknown state; KUE_INVALID_TRANSITION for
--          'active' (only a worker's claim makes a job active, with a lease).
-- A failed job moved back to inactive or delayed gets its attempts anew (a manual retry).
local p, id, state = ARGV[1], ARGV[2], ARGV[3]
if not STATES[state] then
  return redis.error_reply('KUE_INVALID unknown state ' .. state)
end
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if job.state == state then return state end
if state == 'active' then
  return redis.error_reply('KUE_INVALID_TRANSITION only a worker can make a job active')
end

local now = now_ms()
if job.state == 'active' then
  leave_active(p, id, job.type)  -- its worker's lease ends: complete and fail are refused
elseif STATES[job.state] then
  index_remove(p, id, job.type, job.state)
end
local fields = { 'state', state, 'updated_at', int(now) }
if state == 'delayed' and job.promote_at == 0 then
  job.promote_at = now
  fields[#fields + 1] = 'promote_at'; fields[#fields + 1] = int(now)
end
redis.call('HSET', KEYS[1], unpack(fields))
if job.state == 'failed' and (state == 'inactive' or state == 'delayed') then
  redis.call('HDEL', KEYS[1], 'attempts')
end
index_add(p, id, job.type, state, job.priority, job.promote_at, job.ttl, now)
history(p, id, { state = state, at = now, from = job.state })
if state == 'inactive' then
  publish(p, id, 'enqueue', cjson.encode(job.type))
elseif state == 'delayed' then
  redis.call('PUBLISH', k_promote(p), int(job.promote_at))
end
return job.state

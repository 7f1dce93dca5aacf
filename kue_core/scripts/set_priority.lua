-- set_priority: change a job's priority and re-score every set it is in.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] priority (integer)
-- Returns  1.
-- Events   none (Kue publishes none).
-- Errors   KUE_NOT_FOUND, KUE_INVALID.
-- Uses     lib/base (now_ms, int, STATES), lib/keys (k_jobs, k_state, k_type_state, k_group),
--          lib/members (zid, state_score), lib/pins (pin_rescore), lib/attempts (load_job)
local p, id, priority = ARGV[1], ARGV[2], tonumber(ARGV[3])
if not priority then return redis.error_reply('KUE_INVALID priority must be an integer') end
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end

local now = now_ms()
redis.call('HSET', KEYS[1], 'priority', int(priority), 'updated_at', int(now))
local member = zid(id)
redis.call('ZADD', k_jobs(p), priority, member)
if STATES[job.state] then
  -- ZADD XX: re-score only where the job is indexed (an active job keeps its ttl score).
  if job.state ~= 'delayed' and not (job.state == 'active' and job.ttl > 0) then
    redis.call('ZADD', k_state(p, job.state), 'XX',
      state_score(job.state, priority, job.promote_at, job.ttl, now), member)
  end
  redis.call('ZADD', k_type_state(p, job.type, job.state), 'XX', priority, member)
  if job.group and job.state == 'inactive' then
    redis.call('ZADD', k_group(p, job.type, job.group), 'XX', priority, member)
  end
  if job.state == 'pinned' or (job.state == 'inactive' and job.prefer) then
    pin_rescore(p, id, job.type, priority, job.prefer)
  end
end
return 1

-- promote: move delayed jobs that are due to inactive (Kue's promotion timer, atomically).
-- KEYS[1]  <p>:jobs:delayed
-- ARGV[1]  prefix   ARGV[2] most jobs to move in this call
-- Returns  {moved, next due ms or -1 when nothing is delayed, server time ms, the next due
--          time of a schedule (ms) or -1 when no schedule is due to make jobs}.
-- Events   promotion and enqueue [type] per job moved.
-- Uses     lib/base (now_ms), lib/keys (k_job, k_schedules), lib/members (zid_id),
--          lib/attempts (load_job), lib/moves (move_job)
-- Several processes may run it at once: a job is moved once, by whichever call sees it first.
local p, limit = ARGV[1], tonumber(ARGV[2])
if not limit or limit < 1 then return redis.error_reply('KUE_INVALID limit must be positive') end
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
local moved = 0
for _, member in ipairs(due) do
  local id = zid_id(member)
  local key = k_job(p, id)
  local job = load_job(key)
  if job and job.state == 'delayed' then
    move_job(p, id, key, job, 'inactive', now)
    moved = moved + 1
  else
    redis.call('ZREM', KEYS[1], member)  -- left by an interrupted client: not delayed
  end
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local next_due = -1
if #nxt > 0 then next_due = tonumber(nxt[2]) end
local sched = redis.call('ZRANGE', k_schedules(p), 0, 0, 'WITHSCORES')
local next_schedule = -1
if #sched > 0 then next_schedule = tonumber(sched[2]) end
return { moved, next_due, now, next_schedule }

-- promote: move delayed jobs that are due to inactive (Kue's promotion timer, atomically), and
-- end the waits for a signal whose deadline passed (resumed or failed, lib/signals.lua).
-- KEYS[1]  <p>:jobs:delayed
-- ARGV[1]  prefix   ARGV[2] most jobs to move in this call
-- Returns  {moved (waits ended included), next due ms (a delayed job's, a wait's deadline) or
--          -1 when nothing is due, server time ms, the next due time of a schedule (ms) or
--          -1 when no schedule is due to make jobs}.
-- Events   promotion and enqueue [type] per job moved; a wait ended: resumed [name] and
--          enqueue [type], or failed [message].
-- Uses     lib/base (now_ms), lib/keys (k_job, k_state, k_schedules), lib/members (zid_id),
--          lib/attempts (load_job), lib/moves (move_job), lib/signals (wait_timed_out)
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
-- Suspended jobs whose wait for a signal timed out (lib/signals.lua), scored by deadline.
local waits = k_state(p, 'suspended')
for _, member in ipairs(redis.call('ZRANGEBYSCORE', waits, '-inf', now, 'LIMIT', 0, limit)) do
  local id = zid_id(member)
  local key = k_job(p, id)
  local job = load_job(key)
  if job and job.state == 'suspended' then
    wait_timed_out(p, id, key, job, now)
    moved = moved + 1
  else
    redis.call('ZREM', waits, member)
  end
end
local next_due = -1
for _, set in ipairs({ KEYS[1], waits }) do
  local nxt = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if #nxt > 0 and tonumber(nxt[2]) < SIGNAL_FOREVER
    and (next_due < 0 or tonumber(nxt[2]) < next_due) then
    next_due = tonumber(nxt[2])
  end
end
local sched = redis.call('ZRANGE', k_schedules(p), 0, 0, 'WITHSCORES')
local next_schedule = -1
if #sched > 0 then next_schedule = tonumber(sched[2]) end
return { moved, next_due, now, next_schedule }

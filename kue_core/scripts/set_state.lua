-- set_state: move a job to another state by hand (Kue's PUT /job/:id/state/:state).
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] new state
-- ARGV[4]  optional: the states the job may be in, space-separated (a retry: 'failed complete';
--          a promotion: 'delayed'); a job in another state is refused and nothing is written.
-- Returns  the previous state (unchanged when it equals the new one: nothing is written).
-- Events   enqueue [type] when the job moves to inactive (promotion first when it was
--          delayed); its due time on <p>:promote when it moves to delayed.
-- Errors   KUE_NOT_FOUND; KUE_INVALID for an unknown state; KUE_INVALID_TRANSITION for
--          'active' (only a worker's claim makes a job active, with a lease) and for
--          'blocked' (only a save with dependencies blocks a job), for 'suspended' (only a
--          handler's WaitForSignal suspends a job), and for 'pinned' for a job
--          without workers of its own, and for a job outside the states of ARGV[4]. A pinned
--          job moved to inactive stays pinned.
-- Uses     lib/base (STATES, now_ms), lib/pins (waiting), lib/attempts (load_job),
--          lib/moves (move_job)
-- Moving a job to complete or failed releases, or fails, the jobs that depend on it, as
-- complete.lua and fail.lua do.
-- A failed job moved back to inactive or delayed gets its attempts anew (a manual retry).
-- A fan-out job moved to inactive, pinned or delayed starts over: its running runs stop, and
-- its runs, runs_done and runs_failed are cleared (see lib/runs.lua runs_reset).
local p, id, state, from = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if not STATES[state] then
  return redis.error_reply('KUE_INVALID unknown state ' .. state)
end
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if from and from ~= '' and not string.find(' ' .. from .. ' ', ' ' .. job.state .. ' ', 1, true)
then
  local allowed = string.gsub(from, ' ', ' or ')
  return redis.error_reply('KUE_INVALID_TRANSITION job ' .. id .. ' is ' .. job.state
    .. ', not ' .. allowed)
end
if state == 'pinned' and not job.only then
  return redis.error_reply('KUE_INVALID_TRANSITION job ' .. id .. ' has no workers of its own '
    .. 'to wait for (see only)')
end
if state == 'inactive' then state = waiting(job.only) end
if job.state == state then return state end
if state == 'active' then
  return redis.error_reply('KUE_INVALID_TRANSITION only a worker can make a job active')
end
if state == 'blocked' then
  return redis.error_reply('KUE_INVALID_TRANSITION only a save with dependencies blocks a job')
end
if state == 'suspended' then
  return redis.error_reply('KUE_INVALID_TRANSITION only a handler waiting for a signal '
    .. '(WaitForSignal) suspends a job')
end
move_job(p, id, KEYS[1], job, state, now_ms())
return job.state

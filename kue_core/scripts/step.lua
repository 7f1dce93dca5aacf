-- step: record the result of a step of a running job (job.step(), see
-- kue_core/features/steps.py), fenced: only the attempt holding the job's lease records.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] the attempt's fencing token   ARGV[4] the step's
--          name   ARGV[5] its result (JSON)   ARGV[6] the attempt (its number)
-- Returns  1 when recorded; 0 when the step had a result already (it is kept).
-- Events   none; a history entry {state active, step, attempt}.
-- Errors   KUE_NOT_FOUND; KUE_STOPPED when the job is not active under this token.
-- Uses     lib/base (now_ms), lib/events (history)
-- A step's result is the hash field `step:<name>` (`steps` counts them): the job's next
-- attempts read it with the job, and the step is not run again.
local p, id, token, name = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local state, lease, worker = unpack(redis.call('HMGET', KEYS[1], 'state', 'lease', 'workerId'))
if not state then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if state ~= 'active' or lease ~= token then
  return redis.error_reply('KUE_STOPPED the attempt at job ' .. id
    .. ' is over: its step is not recorded')
end
if redis.call('HSETNX', KEYS[1], 'step:' .. name, ARGV[5]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'steps', 1)
history(p, id, { state = 'active', at = now_ms(), worker = worker, step = name,
  attempt = tonumber(ARGV[6]) })
return 1

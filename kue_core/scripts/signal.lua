-- signal: give job `id` signal `name` with a payload (queue.signal(), see lib/signals.lua).
-- The signal is kept on the job; a job suspended waiting for it waits for a worker again.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] the signal's name   ARGV[4] its payload (JSON)
-- Returns  'resumed' (the job waited for it: it waits for a worker now), 'kept' (kept until
--          the job waits for it), or 'already' (the job had that signal: nothing changed).
-- Events   resumed [name] and enqueue [type] when it resumes the job.
-- Errors   KUE_NOT_FOUND; KUE_INVALID_TRANSITION for a job that has ended (complete, failed)
--          without that signal ('already' when it has it: a sender may send again).
-- Uses     lib/base (now_ms), lib/attempts (load_job), lib/signals (wait_of, resume_job)
-- Exactly one signal of a name counts: of two sent at once, one resumes the job (or is
-- kept), and the other is told 'already'.
local p, id, name, payload = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if redis.call('HEXISTS', KEYS[1], 'signal:' .. name) == 1 then return 'already' end
if job.state == 'complete' or job.state == 'failed' then
  return redis.error_reply('KUE_INVALID_TRANSITION job ' .. id .. ' is ' .. job.state
    .. ': it waits for no signal')
end
redis.call('HSET', KEYS[1], 'signal:' .. name, payload)
redis.call('HINCRBY', KEYS[1], 'signals', 1)  -- how many: tells a reader to look for them
if job.state ~= 'suspended' then return 'kept' end
if wait_of(KEYS[1]).name ~= name then return 'kept' end
resume_job(p, id, KEYS[1], job, name, 'signal', now_ms())
return 'resumed'

-- cancel: an operator ends a job wherever it is; it fails at once and is not retried.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] reason ('' for none)
-- Returns  the state the job was in.
-- Events   cancelled [reason], then failed [message] (message: 'cancelled' or
--          'cancelled: <reason>', also kept as the job's error). A job that was active is out
--          of its worker's hands: its lease ends here (complete and fail are refused by the
--          token) and its worker process is told on <p>:control:<worker id> to stop it. A
--          fan-out job's running runs all stop so (see lib/runs.lua stop_runs): each is lost.
-- Errors   KUE_NOT_FOUND; KUE_INVALID_TRANSITION for a complete job.
-- Uses     lib/base (now_ms), lib/attempts (load_job), lib/finishing (cancel_job)
-- The jobs blocked waiting for it follow their policy, as for any job failed for good.
-- Its unique key is released (until_done, debounce). The job is counted as failed, unless it
-- had failed already; its attempts are left as they are (a retry by hand starts them anew).
-- Retention applies as to any failed job (remove [type] for each job it removes), but the
-- cancelled job itself is kept, whatever its remove_on_fail: the caller reads it back.
local p, id, reason = ARGV[1], ARGV[2], ARGV[3]
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if job.state == 'complete' then
  return redis.error_reply('KUE_INVALID_TRANSITION job ' .. id .. ' is complete: only a job '
    .. 'that has not completed can be cancelled')
end
cancel_job(p, id, KEYS[1], job, reason, now_ms())
return job.state

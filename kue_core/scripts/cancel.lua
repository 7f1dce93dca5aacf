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
local now = now_ms()
local message = 'cancelled'
if reason ~= '' then message = message .. ': ' .. reason end
leave_state(p, id, KEYS[1], job, message)
redis.call('HSET', KEYS[1], 'state', 'failed', 'error', message, 'failed_at', int(now),
  'updated_at', int(now))
index_add(p, id, job.type, 'failed', job.priority, 0, 0, now)
history(p, id, { state = 'failed', at = now, from = job.state, cancelled = reason })
if job.state ~= 'failed' then count_outcome(p, job.type, 'failed', now, nil) end
local u = release_unique_of(p, id)
local own = u[3]
publish(p, id, job.type, 'cancelled', cjson.encode(reason))
publish(p, id, job.type, 'failed', cjson.encode(message))
if u[4] then deps_failed(p, id, now) end
if own ~= 'remove' then  -- the cancelled job is kept: the caller reads it back
  retire(p, 'failed', own, now, RETIRE_BATCH, own or tonumber(id) % RETIRE_BATCH == 0)
end
return job.state

-- edit: replace the data of a job that is not running and has not completed (inactive,
-- pinned, delayed, blocked, failed): fix a job's input, then retry it.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] data (JSON)
-- ARGV[4]  its search words ('' = none; see kue_core/features/records.py)
-- Returns  the job's state (unchanged).
-- Events   edited [].
-- Errors   KUE_NOT_FOUND; KUE_INVALID_TRANSITION for an active or complete job.
-- Uses     lib/base (now_ms, int), lib/events (history, publish), lib/attempts (load_job),
--          lib/records (reword), lib/payloads (stored_name, hold_payload)
local p, id = ARGV[1], ARGV[2]
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if job.state == 'active' or job.state == 'complete' then
  return redis.error_reply('KUE_INVALID_TRANSITION job ' .. id .. ' is ' .. job.state
    .. ': only the data of a waiting or failed job can be edited')
end
local now = now_ms()
redis.call('HSET', KEYS[1], 'data', ARGV[3], 'updated_at', int(now))
hold_payload(p, KEYS[1], 'data', stored_name(ARGV[3]))  -- the data it replaced: to the trash
reword(p, id, KEYS[1], ARGV[4])
history(p, id, { state = job.state, at = now, edited = true })
publish(p, id, job.type, 'edited', '')
return job.state

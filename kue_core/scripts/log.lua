-- log: append a line to a job's log (Kue's Job#log), only while the job exists.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] line
-- Returns  the number of lines in the log.
-- Events   none.
-- Errors   KUE_NOT_FOUND.
-- Uses     lib/base (int, now_ms), lib/keys (k_log)
local p, id = ARGV[1], ARGV[2]
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
redis.call('HSET', KEYS[1], 'updated_at', int(now_ms()))
return redis.call('RPUSH', k_log(p, id), ARGV[3])

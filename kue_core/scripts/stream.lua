-- stream: append a part of a running job's output to its stream (job.stream(), see
-- kue_core/features/streams.py), fenced: only the attempt holding the job's lease writes.
-- KEYS[1]  <p>:job:<id>   (it writes <p>:job:<id>:stream)
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] the attempt's fencing token   ARGV[4] the attempt
--          (its number)   ARGV[5] the part (JSON)   ARGV[6] entries kept at most
-- Returns  the part's entry id (<ms>-<seq>: where a reader resumes after it).
-- Events   none (readers block on the stream itself: XREAD).
-- Errors   KUE_NOT_FOUND; KUE_STOPPED when the job is not active under this token (its
--          attempt is over: recovered, cancelled, timed out).
-- Uses     lib/keys (k_stream)
local p, id, token = ARGV[1], ARGV[2], ARGV[3]
local state, lease = unpack(redis.call('HMGET', KEYS[1], 'state', 'lease'))
if not state then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if state ~= 'active' or lease ~= token then
  return redis.error_reply('KUE_STOPPED the attempt at job ' .. id .. ' is over: its stream is closed to it')
end
redis.call('HSET', KEYS[1], 'streamed', '1')  -- the job's removal deletes it (delete_job)
return redis.call('XADD', k_stream(p, id), 'MAXLEN', '~', ARGV[6], '*', 'a', ARGV[4], 'd', ARGV[5])

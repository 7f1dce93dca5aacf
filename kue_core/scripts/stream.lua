-- stream: append parts of a running job's output to its stream (job.stream(), see
-- kue_core/features/streams.py), fenced: only the attempt holding the job's lease writes.
-- KEYS[1]  <p>:job:<id>   (it writes <p>:job:<id>:stream)
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] the attempt's fencing token   ARGV[4] entries kept
--          at most   ARGV[5] bytes of parts kept at most   ARGV[6...] the parts (JSON), in
--          order (an async handler's parts written while the call before was away go as one)
-- Returns  the last part's entry id (<ms>-<seq>: where a reader resumes after it).
-- Events   none (readers block on the stream itself: XREAD); the first part of an attempt
--          writes a history entry {state active, streamed: its number}.
-- Errors   KUE_NOT_FOUND; KUE_STOPPED when the job is not active under this token (its
--          attempt is over: recovered, cancelled, timed out).
-- Uses     lib/base (now_ms), lib/keys (k_stream), lib/events (history)
-- Each entry holds its attempt `a`: 1 for the first claim of the job that streamed, one more
-- for each later claim that streams (a retry, the recovery of a job whose worker died, the run
-- after a signal): counted here (`stream_runs`, with the token of the last claim that streamed
-- in `stream_token`), since Kue's attempts count failures only.
-- The job's `streamed` field holds the bytes of parts the stream holds (and tells the job's
-- removal to delete it: delete_job). Past either bound, the oldest parts go until the stream
-- holds nine tenths of both: each part is dropped once, so trimming costs O(1) a part.
local p, id, token = ARGV[1], ARGV[2], ARGV[3]
local state, lease, last, runs = unpack(redis.call('HMGET', KEYS[1], 'state', 'lease',
  'stream_token', 'stream_runs'))
if not state then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if state ~= 'active' or lease ~= token then
  return redis.error_reply('KUE_STOPPED the attempt at job ' .. id
    .. ' is over: its stream is closed to it')
end
runs = tonumber(runs) or 0
if last ~= token then  -- the attempt's first part: in the job's timeline
  runs = runs + 1
  redis.call('HSET', KEYS[1], 'stream_token', token, 'stream_runs', runs)
  history(p, id, { state = 'active', at = now_ms(), streamed = runs })
end
local key, entries, most = k_stream(p, id), tonumber(ARGV[4]), tonumber(ARGV[5])
local entry, bytes = nil, 0
for i = 6, #ARGV do
  entry = redis.call('XADD', key, '*', 'a', runs, 'd', ARGV[i])
  bytes = bytes + #ARGV[i]
end
local held = redis.call('HINCRBY', KEYS[1], 'streamed', bytes)
local count = redis.call('XLEN', key)
if held > most or count > entries then
  local keep_bytes, keep_count, dropped, after = most * 0.9, entries * 0.9, {}, '-'
  while held > keep_bytes or count > keep_count do
    local batch = redis.call('XRANGE', key, after, '+', 'COUNT', 100)
    local stop = #batch
    for i, e in ipairs(batch) do
      if e[1] == entry or (held <= keep_bytes and count <= keep_count) then stop = i - 1 break end
      local fields = e[2]
      for f = 1, #fields, 2 do
        if fields[f] == 'd' then held = held - #fields[f + 1] end
      end
      count = count - 1
      dropped[#dropped + 1] = e[1]
    end
    if stop < #batch or #batch == 0 then break end
    after = '(' .. batch[#batch][1]
  end
  for i = 1, #dropped, 500 do
    redis.call('XDEL', key, unpack(dropped, i, math.min(i + 499, #dropped)))
  end
  redis.call('HSET', KEYS[1], 'streamed', held)
end
return entry

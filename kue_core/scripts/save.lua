-- save: store new jobs and index them (Kue's Job#save), one or many per call.
-- KEYS[1]  <p>:ids (id counter; every other key is built from the prefix, same slot)
-- ARGV[1]  prefix
-- ARGV[2]  number of jobs n; then SAVE_WIDTH (10) values per job:
--          type, data (JSON), priority, delay ms (0 = none), max_attempts,
--          backoff (JSON, '' = none), ttl ms (0 = none), removeOnComplete ('1' or ''),
--          due time (ms since the epoch, 0 = none): instead of the delay, wait until this time
--          on this server's clock (not at all when it is past),
--          records ('' = none): tags, search words, tracking, retention, group and trace
--          context, as the JSON object kue_core/features/records.py save_extras makes
-- Returns  the new ids, in order.
-- Events   enqueue [type] for every job that starts inactive (a delayed job publishes none;
--          past the first EVENTS_UNASKED of a call, only when someone listens: lib/events);
--          a delayed job's due time (ms) on <p>:promote, for promotion timers.
-- Errors   KUE_INVALID when a numeric value is not a number (nothing is written).
-- Uses     lib/base (now_ms), lib/saving (save_row_ok, save_job)
local p = ARGV[1]
local n = tonumber(ARGV[2])
if not n or #ARGV ~= 2 + n * SAVE_WIDTH then
  return redis.error_reply('KUE_INVALID save expects ' .. SAVE_WIDTH .. ' values per job')
end
for i = 0, n - 1 do
  if not save_row_ok(2 + i * SAVE_WIDTH) then
    return redis.error_reply('KUE_INVALID job ' .. (i + 1) .. ' of the batch is malformed')
  end
end

local now = now_ms()
local ids = {}
for i = 0, n - 1 do
  ids[#ids + 1] = save_job(p, KEYS[1], 2 + i * SAVE_WIDTH, now, nil)
end
return ids

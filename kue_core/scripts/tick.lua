-- tick: a schedule's firing (see kue_core/jobs/schedules.py): make its jobs and move its next due
-- time on, in one call, so that each tick makes its jobs once whatever the number of worker
-- processes planning it at the same moment.
-- KEYS[1]  <p>:ids (id counter; every other key is built from the prefix, same slot)
-- ARGV[1]  prefix   ARGV[2] schedule key   ARGV[3] the due time planned from ('' = a trigger:
--          one job now, the timetable unchanged)   ARGV[4] the definition's rev planned on
-- ARGV[5]  the next due time (ms; -1 = none, the schedule has ended)
-- ARGV[6]  the jobs' unique key ('' = none)   ARGV[7] its mode   ARGV[8] its ttl ms (see
--          save_unique.lua): a tick whose key a job holds makes no job (or changes the holder,
--          as the mode says) and counts in the schedule's `deduplicated`
-- ARGV[9]  number of jobs n; then per job the SAVE_WIDTH values save.lua takes, and its tick
--          (ms: the time it is for)
-- Returns  {'made', held, ids...}: with a unique key, each tick's new job or the holder, and
--          held: how many ticks found a holder; {'stale'} when the schedule is no longer due at ARGV[3] under
--          rev ARGV[4] (another process fired it, or it was redefined, paused or removed:
--          nothing is written); {'gone'} when it does not exist.
-- Events   as save.lua for each job; the next due time on <p>:promote.
-- Errors   KUE_INVALID for malformed values (nothing is written).
-- Uses     lib/base (score, now_ms, int), lib/keys (k_schedule, k_schedules, k_promote),
--          lib/saving (unique_ok, save_row_ok, save_job, save_unique)
-- Each job's hash has `schedule` (the key) and `tick`.
local p, key, expected, rev = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local at, n = tonumber(ARGV[5]), tonumber(ARGV[9])
local ukey, umode, uttl = ARGV[6], ARGV[7], tonumber(ARGV[8])
local width, first = SAVE_WIDTH + 1, 9
if not at or not n or #ARGV ~= first + n * width
    or (ukey ~= '' and not unique_ok(ukey, umode, uttl)) then
  return redis.error_reply('KUE_INVALID a schedule firing is malformed')
end
for i = 0, n - 1 do
  if not save_row_ok(first + i * width) or not tonumber(ARGV[first + (i + 1) * width]) then
    return redis.error_reply('KUE_INVALID job ' .. (i + 1) .. ' of the firing is malformed')
  end
end
local hkey, zkey = k_schedule(p, key), k_schedules(p)
local h = redis.call('HMGET', hkey, 'rev', 'paused')
if not h[1] then
  redis.call('ZREM', zkey, key)
  return { 'gone' }
end
local trigger = expected == ''
if not trigger then
  local score = redis.call('ZSCORE', zkey, key)
  if h[1] ~= rev or h[2] == '1' or not score or tonumber(score) ~= tonumber(expected) then
    return { 'stale' }
  end
end
local now = now_ms()
local out = { 'made', 0 }
local last, tick, held = nil, nil, 0
for i = 0, n - 1 do
  local b = first + i * width
  tick = ARGV[b + width]
  local extra = { 'schedule', key, 'tick', tick }
  if ukey == '' then
    last = save_job(p, KEYS[1], b, now, extra, false)
  else
    local made = save_unique(p, KEYS[1], b, ukey, umode, uttl, now, extra)
    last = made[1]
    if made[2] ~= 'saved' then held = held + 1 end
  end
  out[#out + 1] = last
end
if last then redis.call('HSET', hkey, 'last_job', last, 'last_tick', tick) end
if held > 0 then redis.call('HINCRBY', hkey, 'deduplicated', held) end
out[2] = held
if trigger then
  redis.call('HINCRBY', hkey, 'triggered', n)
  return out
end
redis.call('HINCRBY', hkey, 'runs', n)
if at >= 0 then
  redis.call('ZADD', zkey, at, key)
  redis.call('PUBLISH', k_promote(p), int(at))
else
  redis.call('ZREM', zkey, key)
  redis.call('HSET', hkey, 'ended', '1')
end
return out

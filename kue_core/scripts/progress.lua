-- progress: record how far a job has got (Kue's Job#progress).
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] percent (0..100)   ARGV[4] data (JSON, '' = none)
-- Returns  1.
-- Events   progress [percent, data or null].
-- Errors   KUE_NOT_FOUND, KUE_INVALID.
-- Uses     lib/base (int, now_ms), lib/events (publish)
local p, id, pct, data = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not pct or pct < 0 or pct > 100 then
  return redis.error_reply('KUE_INVALID progress must be a percentage from 0 to 100')
end
local jtype = redis.call('HGET', KEYS[1], 'type')
if not jtype then return redis.error_reply('KUE_NOT_FOUND ' .. id) end

local fields = { 'progress', int(pct), 'updated_at', int(now_ms()) }
if data ~= '' then
  fields[#fields + 1] = 'progress_data'; fields[#fields + 1] = data
end
redis.call('HSET', KEYS[1], unpack(fields))
if data == '' then data = 'null' end
publish(p, id, jtype, 'progress', int(pct) .. ',' .. data)
return 1

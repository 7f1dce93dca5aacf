-- schedule: define, pause, resume or remove a schedule (see kue_core/jobs/schedules.py).
-- KEYS[1]  <p>:schedules (key -> next due ms)
-- ARGV[1]  prefix   ARGV[2] op: set, pause, resume or remove   ARGV[3] schedule key
-- ARGV[4]  for set and resume: the next due time (ms; -1 = none: it has ended)
-- ARGV[5..] for set: field, value, ... of the definition (replacing the one stored; its runs,
--          deduplicated ticks, last job and pause are kept)
-- Returns  1, or 0 when the schedule does not exist (pause, resume, remove).
-- Events   the next due time on <p>:promote, to wake the promotion timers (set, resume).
-- Errors   KUE_INVALID for a malformed call.
-- Uses     lib/base (now_ms, int), lib/keys (k_schedule, k_promote)
-- The definition's rev goes up on every set, so that a firing planned on the old one is refused
-- (tick.lua). A paused schedule keeps its definition and is out of <p>:schedules.
local p, op, key = ARGV[1], ARGV[2], ARGV[3]
local hkey = k_schedule(p, key)
local now = now_ms()

local function due(at)
  if at >= 0 and redis.call('HGET', hkey, 'paused') ~= '1' then
    redis.call('ZADD', KEYS[1], at, key)
    redis.call('HDEL', hkey, 'ended')
    redis.call('PUBLISH', k_promote(p), int(at))
  else
    redis.call('ZREM', KEYS[1], key)
    if at < 0 then redis.call('HSET', hkey, 'ended', '1') end
  end
end

if op == 'set' then
  local at = tonumber(ARGV[4])
  if not at or #ARGV < 6 or #ARGV % 2 ~= 0 then
    return redis.error_reply('KUE_INVALID a schedule definition is malformed')
  end
  local fields = {}
  for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
  local names = { 'runs', 'triggered', 'deduplicated', 'last_job', 'last_tick', 'paused' }
  local kept = redis.call('HMGET', hkey, 'created_at', unpack(names))
  local created = table.remove(kept, 1)
  redis.call('DEL', hkey)
  redis.call('HSET', hkey, unpack(fields))
  redis.call('HSET', hkey, 'updated_at', int(now), 'created_at', created or int(now))
  for i, name in ipairs(names) do
    if kept[i] then redis.call('HSET', hkey, name, kept[i]) end
  end
  redis.call('HINCRBY', hkey, 'rev', 1)
  due(at)
  return 1
end
if redis.call('EXISTS', hkey) == 0 then return 0 end
if op == 'pause' then
  redis.call('HSET', hkey, 'paused', '1')
  redis.call('ZREM', KEYS[1], key)
elseif op == 'resume' then
  local at = tonumber(ARGV[4])
  if not at then return redis.error_reply('KUE_INVALID resume takes the next due time') end
  redis.call('HDEL', hkey, 'paused')
  redis.call('HINCRBY', hkey, 'rev', 1)
  due(at)
elseif op == 'remove' then
  redis.call('DEL', hkey)
  redis.call('ZREM', KEYS[1], key)
else
  return redis.error_reply('KUE_INVALID unknown schedule operation ' .. op)
end
return 1

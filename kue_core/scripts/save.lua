-- save: store new jobs and index them (Kue's Job#save), one or many per call.
-- KEYS[1]  <p>:ids (id counter; every other key is built from the prefix, same slot)
-- ARGV[1]  prefix
-- ARGV[2]  number of jobs n; then SAVE_WIDTH (9) values per job:
--          type, data (JSON), priority, delay ms (0 = none), max_attempts,
--          backoff (JSON, '' = none), ttl ms (0 = none), removeOnComplete ('1' or ''),
--          due time (ms since the epoch, 0 = none): instead of the delay, wait until this time
--          on this server's clock (not at all when it is past)
-- Returns  the new ids, in order.
-- Events   enqueue [type] for every job that starts inactive (a delayed job publishes none);
--          a delayed job's due time (ms) on <p>:promote, for promotion timers.
-- Errors   KUE_INVALID when a numeric value is not a number (nothing is written).
local p = ARGV[1]
local n = tonumber(ARGV[2])
if not n or #ARGV ~= 2 + n * SAVE_WIDTH then
  return redis.error_reply('KUE_INVALID save expects ' .. SAVE_WIDTH .. ' values per job')
end
for i = 0, n - 1 do
  local b = 2 + i * SAVE_WIDTH
  if ARGV[b + 1] == '' or not tonumber(ARGV[b + 3]) or not tonumber(ARGV[b + 4])
      or not tonumber(ARGV[b + 5]) or not tonumber(ARGV[b + 7]) or not tonumber(ARGV[b + 9]) then
    return redis.error_reply('KUE_INVALID job ' .. (i + 1) .. ' of the batch is malformed')
  end
end

local now = now_ms()
local ids = {}
for i = 0, n - 1 do
  local b = 2 + i * SAVE_WIDTH
  local jtype, data, priority = ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3])
  local delay, ttl, due_at = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 7]), tonumber(ARGV[b + 9])
  if due_at > 0 then delay = math.max(0, due_at - now) end
  local id = redis.call('INCR', KEYS[1])
  while redis.call('EXISTS', k_job(p, id)) == 1 do
    id = redis.call('INCR', KEYS[1])
  end
  local state = 'inactive'
  if delay > 0 then state = 'delayed' end
  local promote_at = now + delay
  local fields = {
    'type', jtype, 'data', data, 'priority', int(priority), 'state', state,
    'created_at', int(now), 'promote_at', int(promote_at), 'updated_at', int(now),
    'max_attempts', ARGV[b + 5],
  }
  if delay > 0 then
    fields[#fields + 1] = 'delay'; fields[#fields + 1] = int(delay)
  end
  if ARGV[b + 6] ~= '' then
    fields[#fields + 1] = 'backoff'; fields[#fields + 1] = ARGV[b + 6]
  end
  if ttl > 0 then
    fields[#fields + 1] = 'ttl'; fields[#fields + 1] = int(ttl)
  end
  if ARGV[b + 8] == '1' then
    fields[#fields + 1] = 'removeOnComplete'; fields[#fields + 1] = 'true'
  end
  redis.call('HSET', k_job(p, id), unpack(fields))
  redis.call('ZADD', k_jobs(p), priority, zid(id))
  index_add(p, id, jtype, state, priority, promote_at, ttl, now)
  redis.call('SADD', k_types(p), jtype)
  history(p, id, { state = state, at = now })
  if state == 'inactive' then
    publish(p, id, jtype, 'enqueue', cjson.encode(jtype))
  else
    redis.call('PUBLISH', k_promote(p), int(promote_at))  -- wake promoters due sooner
  end
  ids[#ids + 1] = id
end
return ids

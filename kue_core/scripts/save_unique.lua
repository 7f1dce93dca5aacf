-- save_unique: store one new job that has a unique key, unless a job holds the key already
-- (see kue_core/unique.py for the modes).
-- KEYS[1]  <p>:ids
-- ARGV[1]  prefix   ARGV[2..11] the SAVE_WIDTH values of one job, as save.lua takes them
-- ARGV[12] unique key   ARGV[13] mode (until_done, throttle, debounce, reuse)
-- ARGV[14] ttl ms of the key (0 = none; throttle needs one)
-- Returns  {id, outcome, state}: outcome 'saved' (a new job holds the key), 'deduplicated'
--          (the holder's id; nothing written), 'debounced' (the delayed or waiting holder got
--          the new data and due time), 'reused' (kue-unique's mode: the holder got the new
--          data, and waits again if it had finished); state: the job's state now.
-- Events   those of save.lua for a new job; deduplicated [key] from the holder otherwise
--          (with promotion or enqueue events when it moves).
-- Errors   KUE_INVALID for malformed values (nothing is written).
local p, key, mode, key_ttl = ARGV[1], ARGV[12], ARGV[13], tonumber(ARGV[14])
if #ARGV ~= 1 + SAVE_WIDTH + 3 or not save_row_ok(1) or not key_ttl or key == ''
    or (mode ~= 'until_done' and mode ~= 'throttle' and mode ~= 'debounce' and mode ~= 'reuse')
    or (mode == 'throttle' and key_ttl <= 0) then
  return redis.error_reply('KUE_INVALID save_unique arguments are malformed')
end
local now = now_ms()
local k = k_unique(p, key)
local holder
if mode == 'reuse' then
  holder = redis.call('HGET', k_unique_jobs(p), key)
else
  holder = redis.call('GET', k)
end
local job = holder and load_job(k_job(p, holder))

local function new_job()
  local id = save_job(p, KEYS[1], 1, now, { 'unique', key, 'unique_mode', mode })
  if mode == 'reuse' then
    redis.call('HSET', k_unique_jobs(p), key, id)
  elseif key_ttl > 0 then
    redis.call('SET', k, id, 'PX', key_ttl)
  else
    redis.call('SET', k, id)
  end
  return { id, 'saved', redis.call('HGET', k_job(p, id), 'state') }
end

local function held(outcome, state)
  publish(p, holder, job.type, 'deduplicated', cjson.encode(key))
  return { tonumber(holder), outcome, state }
end

if mode == 'throttle' and holder then  -- blocks for its ttl, whatever became of the job
  if not job then return { tonumber(holder), 'deduplicated', false } end
  return held('deduplicated', job.state)
end
if not job then return new_job() end  -- a key left by a job deleted without our scripts
if mode == 'until_done' then
  if job.state == 'complete' or job.state == 'failed' then return new_job() end
  return held('deduplicated', job.state)
end

-- debounce and reuse change the holder: new data, and the new job's delay from now.
local jkey = k_job(p, holder)
local delay, due_at = tonumber(ARGV[5]), tonumber(ARGV[10])
if due_at > 0 then delay = math.max(0, due_at - now) end
if mode == 'debounce' and job.state ~= 'delayed' and job.state ~= 'inactive' then
  return new_job()  -- it has started: a duplicate is new work
end
redis.call('HSET', jkey, 'data', ARGV[3], 'updated_at', int(now))
local words = nil  -- the duplicate's data words replace the holder's
if ARGV[11] ~= '' then words = cjson.decode(ARGV[11]).words end
reword(p, holder, jkey, words)
if job.state == 'active' then
  history(p, holder, { state = 'active', at = now, edited = true, unique = key })
  return held('reused', 'active')  -- reuse of a running job: it has the new data next time
end
local state = 'inactive'
if delay > 0 then state = 'delayed' end
if job.state == 'delayed' then
  index_remove(p, holder, job.type, 'delayed')
elseif STATES[job.state] then
  index_remove(p, holder, job.type, job.state)
end
local fields = { 'state', state, 'promote_at', int(now + delay) }
if delay > 0 then
  fields[#fields + 1] = 'delay'; fields[#fields + 1] = int(delay)
end
redis.call('HSET', jkey, unpack(fields))
if job.state == 'failed' then redis.call('HDEL', jkey, 'attempts') end
index_add(p, holder, job.type, state, job.priority, now + delay, 0, now)
history(p, holder, { state = state, at = now, from = job.state, unique = key })
if state == 'delayed' then
  redis.call('PUBLISH', k_promote(p), int(now + delay))
elseif job.state ~= 'inactive' then
  publish(p, holder, job.type, 'enqueue', cjson.encode(job.type))
end
if mode == 'debounce' then return held('debounced', state) end
return held('reused', state)

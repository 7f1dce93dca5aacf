-- lib.lua: helpers prepended to every kue script when it is loaded (see kue_core/scripts.py).
-- Key names mirror kue_core/keys.py; tests/scripts/test_layout.py checks that they agree.

local HISTORY_LENGTH = 50

-- Milliseconds since the epoch on the Redis server's clock: one clock for every worker.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers as plain decimal text (Lua would print large numbers in exponent form).
local function int(n)
  return string.format('%d', n)
end

local STATES = { inactive = true, active = true, complete = true, failed = true, delayed = true }

local function k_job(p, id) return p .. ':job:' .. id end
local function k_log(p, id) return p .. ':job:' .. id .. ':log' end
local function k_history(p, id) return p .. ':job:' .. id .. ':history' end
local function k_jobs(p) return p .. ':jobs' end
local function k_state(p, state) return p .. ':jobs:' .. state end
local function k_type_state(p, jtype, state) return p .. ':jobs:' .. jtype .. ':' .. state end
local function k_types(p) return p .. ':job:types' end
local function k_tokens(p, jtype) return p .. ':' .. jtype .. ':jobs' end
local function k_events(p) return p .. ':events' end

-- Kue's zset member: two-digit length of the id, '|', the id ("01|7"); keeps FIFO per score.
local function zid(id)
  local s = tostring(id)
  return string.format('%02d|%s', #s, s)
end

-- Score in the global per-state set, as Kue 0.11 computes it.
local function state_score(state, priority, promote_at, ttl, now)
  if state == 'delayed' then return promote_at end
  if state == 'active' then
    if ttl > 0 then return now + ttl end
    if priority < 0 then return priority end
    return -priority
  end
  return priority
end

-- Put a job into the sets of `state` (and wake a worker when it becomes inactive).
local function index_add(p, id, jtype, state, priority, promote_at, ttl, now)
  local member = zid(id)
  redis.call('ZADD', k_state(p, state), state_score(state, priority, promote_at, ttl, now), member)
  redis.call('ZADD', k_type_state(p, jtype, state), priority, member)
  if state == 'inactive' then
    redis.call('LPUSH', k_tokens(p, jtype), 1)
  end
end

local function index_remove(p, id, jtype, state)
  local member = zid(id)
  redis.call('ZREM', k_state(p, state), member)
  redis.call('ZREM', k_type_state(p, jtype, state), member)
end

-- Publish a Kue event: {"id":<id>,"event":"<name>","args":["<name>", ...]}.
-- `extra` is the JSON text of the further arguments, comma separated ('' for none).
local function publish(p, id, event, extra)
  local args = '"' .. event .. '"'
  if extra ~= '' then args = args .. ',' .. extra end
  redis.call('PUBLISH', k_events(p),
    '{"id":' .. tostring(id) .. ',"event":"' .. event .. '","args":[' .. args .. ']}')
end

-- Append one entry to the job's transition history, keeping the last HISTORY_LENGTH.
local function history(p, id, entry)
  local key = k_history(p, id)
  if redis.call('RPUSH', key, cjson.encode(entry)) > HISTORY_LENGTH then
    redis.call('LTRIM', key, -HISTORY_LENGTH, -1)
  end
end

-- The fields a transition needs from a job hash, or nil when the job does not exist.
local function load_job(key)
  local h = redis.call('HMGET', key, 'type', 'state', 'priority', 'promote_at', 'ttl', 'attempts')
  if not h[1] then return nil end
  return {
    type = h[1],
    state = h[2] or '',
    priority = tonumber(h[3]) or 0,
    promote_at = tonumber(h[4]) or 0,
    ttl = tonumber(h[5]) or 0,
    attempts = tonumber(h[6]) or 0,
  }
end

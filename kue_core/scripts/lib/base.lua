-- Uses     no other part
-- The helpers of every kue script, in parts by topic (kue_core/scripts/lib/): the loader
-- (kue_core/store/lua_source.py) joins them in the order of its LIB_PARTS, then takes from them
-- the helpers each script uses. A part's first line, Uses, names the parts it calls (each
-- before it in LIB_PARTS), as a script's header names the parts and helpers it calls. A
-- comment above a helper is the end of the part's text before it, so parts carry no other
-- header: this is the only one, and LIB_PARTS says what each part holds. Key names mirror
-- kue_core/base/keys.py; tests/scripts/test_layout.py checks that they agree. Constants in
-- capitals (HISTORY_LENGTH, DURATION_BUCKETS_MS...) are not defined here: they come from
-- kue_core/defaults.py, in a preamble the loader puts ahead of these.

-- Milliseconds since the epoch on the Redis server's clock: one clock for every worker.
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)  -- arithmetic reads the digits (no tonumber call)
end

-- Integers as plain decimal text (Lua would print large numbers in exponent form), each
-- written once per call: formatting a number is among the dearest steps of a script (a
-- number given to redis.call is formatted too, by Redis: see score). `ints_made` is emptied
-- by the code every call runs first (lib/fence.lua).
local ints_made
local function int(n)
  local s = ints_made[n]
  if not s then
    s = string.format('%d', n)
    if n == n then ints_made[n] = s end  -- NaN is no table key
  end
  return s
end

-- A zset score for redis.call: an integer as int text (formatted once per call), any other
-- number as it is.
local function score(n)
  if n % 1 == 0 and n > -2 ^ 53 and n < 2 ^ 53 then return int(n) end
  return n
end

local STATES = { inactive = true, active = true, complete = true, failed = true, delayed = true,
  blocked = true, pinned = true, suspended = true }


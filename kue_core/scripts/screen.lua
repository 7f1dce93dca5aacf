-- screen: which members of a set may not belong there, and which keys of a job outlive it; a
--         quick pass of kue doctor over every member, which then looks closely at the suspects
--         (inspect.lua for those of the index sets). Writes nothing.
-- KEYS[1]  <p>:jobs (every key read is built from the prefix, same slot)
-- ARGV[1]  prefix   ARGV[2] set name (its key without '<p>:', '' for none)
-- ARGV[3]  number of members s; then s members of that set; then pairs of a job id and a part
--          of its keys: 'log', 'history', 'deps', 'dependents', 'results', 'runs' or 'stream'.
-- Returns  {members, parts}: the members that may not belong, by the set's name (below); the
--          parts that exist while their job does not, as {id, part, ...}.
--          An index set ('jobs', 'leases', 'jobs:...'; members '01|7'): those whose job has no
--            hash, no type, or a state or type the set is not for (the rule of _belongs in
--            kue_core/doctor/core.py, scores aside).
--          'awaited' (members '01|7'): those still in <p>:awaited whose job has ended
--            (complete, failed) or is gone, as the dependencies sweep (unblock.lua) reads it.
--          'job:<id>:dependents' (members: ids): those still in the set whose job is gone or
--            does not list <id> in its deps.
--          'blocked' (no such set; members '01|7' of jobs seen blocked): those still blocked
--            that wait for no job (no member of their deps zset scored 0, as lib/deps.lua counts).
-- Events   none.
-- Uses     lib/keys (k_log, k_history, k_deps, k_dependents, k_results, k_runs, k_stream, k_job,
--          k_awaited),
--          lib/members (zid_id), lib/events (history)
local p, name, s = ARGV[1], ARGV[2], tonumber(ARGV[3])
if not s or (#ARGV - 3 - s) % 2 ~= 0 then
  return redis.error_reply('KUE_INVALID screen arguments are malformed')
end
local PARTS = { log = k_log, history = k_history, deps = k_deps, dependents = k_dependents,
  results = k_results, runs = k_runs, stream = k_stream }

local function key_type(key) return redis.call('TYPE', key).ok end

local function indexed(member)
  local key = k_job(p, zid_id(member))
  if key_type(key) ~= 'hash' then return false end
  local h = redis.call('HMGET', key, 'type', 'state')
  local jtype, state = h[1], h[2]
  if not jtype then return false end
  if name == 'jobs' then return true end
  if name == 'leases' then return state == 'active' end
  if not state or state == '' then return false end
  return name == 'jobs:' .. state or name == 'jobs:' .. jtype .. ':' .. state
end

-- A job key of another Redis type is left to the other findings (not-a-hash).
local function awaited(member)
  local key = k_job(p, zid_id(member))
  if key_type(k_awaited(p)) ~= 'zset' or not redis.call('ZSCORE', k_awaited(p), member) then
    return true
  end
  local kind = key_type(key)
  if kind ~= 'hash' then return kind ~= 'none' end
  local state = redis.call('HGET', key, 'state')
  return state and state ~= 'complete' and state ~= 'failed'
end

local owner = string.match(name, '^job:([1-9]%d*):dependents$')
local function depends(member)
  local set = k_dependents(p, owner)
  if key_type(set) ~= 'set' or redis.call('SISMEMBER', set, member) == 0 then return true end
  local key = k_job(p, member)
  if key_type(key) ~= 'hash' or not redis.call('HGET', key, 'type') then return false end
  local kind = key_type(k_deps(p, member))
  if kind == 'none' then return false end
  return kind ~= 'zset' or redis.call('ZSCORE', k_deps(p, member), owner) ~= false
end

local function waits(member)
  local id = zid_id(member)
  local key = k_job(p, id)
  if key_type(key) ~= 'hash' or redis.call('HGET', key, 'state') ~= 'blocked' then return true end
  local kind = key_type(k_deps(p, id))
  if kind == 'none' then return false end
  return kind ~= 'zset' or redis.call('ZCOUNT', k_deps(p, id), 0, 0) > 0
end

local fits = indexed
if name == 'awaited' then
  fits = awaited
elseif name == 'blocked' then
  fits = waits
elseif owner then
  fits = depends
end

local suspects, orphans = {}, {}
for i = 4, 3 + s do
  if not fits(ARGV[i]) then suspects[#suspects + 1] = ARGV[i] end
end
for i = 4 + s, #ARGV, 2 do
  local id, part = ARGV[i], ARGV[i + 1]
  local key_of = PARTS[part]
  if key_of and redis.call('EXISTS', k_job(p, id)) == 0
      and redis.call('EXISTS', key_of(p, id)) == 1 then
    orphans[#orphans + 1] = id; orphans[#orphans + 1] = part
  end
end
return { suspects, orphans }

-- screen: which members of an index set may not belong there, and which job logs have no
--         job; a quick pass of kue doctor over every member, which then inspects the suspects
--         closely (inspect.lua). Writes nothing.
-- KEYS[1]  <p>:jobs (every key read is built from the prefix, same slot)
-- ARGV[1]  prefix   ARGV[2] set name (its key without '<p>:', '' for none)
-- ARGV[3]  number of members s; then s members of that set ('01|7'); then pairs of a job id
--          and 'log' or 'history'.
-- Returns  {members, lists}: the members whose job has no hash, no type, or a state or type
--          the set is not for (the rule of _belongs in kue_core/doctor.py, scores aside); the
--          lists that exist while their job does not, as {id, part, ...}.
-- Events   none.
local p, name, s = ARGV[1], ARGV[2], tonumber(ARGV[3])
if not s or (#ARGV - 3 - s) % 2 ~= 0 then
  return redis.error_reply('KUE_INVALID screen arguments are malformed')
end

local function fits(member)
  local key = k_job(p, zid_id(member))
  if redis.call('TYPE', key).ok ~= 'hash' then return false end
  local h = redis.call('HMGET', key, 'type', 'state')
  local jtype, state = h[1], h[2]
  if not jtype then return false end
  if name == 'jobs' then return true end
  if name == 'leases' then return state == 'active' end
  if not state or state == '' then return false end
  return name == 'jobs:' .. state or name == 'jobs:' .. jtype .. ':' .. state
end

local suspects, orphans = {}, {}
for i = 4, 3 + s do
  if not fits(ARGV[i]) then suspects[#suspects + 1] = ARGV[i] end
end
for i = 4 + s, #ARGV, 2 do
  local id, part = ARGV[i], ARGV[i + 1]
  local list = k_history(p, id)
  if part == 'log' then list = k_log(p, id) end
  if redis.call('EXISTS', k_job(p, id)) == 0 and redis.call('EXISTS', list) == 1 then
    orphans[#orphans + 1] = id; orphans[#orphans + 1] = part
  end
end
return { suspects, orphans }

-- inspect: a consistent snapshot of some jobs and job types, for kue doctor; writes nothing.
-- KEYS[1]  <p>:jobs (every key read is built from the prefix, same slot)
-- ARGV[1]  prefix   ARGV[2] number of jobs n   ARGV[3] number of types t
--          then n jobs, each: id, number of further sets m, then m set names (a set's key
--          without '<p>:', as 'jobs:email:inactive'); then t job types.
-- Returns  {now ms, jobs, types}. jobs: per job {id, key type ('none', 'hash' or another
--          Redis type), fields, sets}: fields (a hash only) are type, state, priority,
--          promote_at, ttl, updated_at, created_at, delay, workerId, stalls, lease (its fencing
--          token: a claim of ours wrote it), then 1/0 for "has data", for "its type is in
--          <p>:job:types" and for "it fans out", then the expiry of its worker's process lease
--          in <p>:worker-leases (nil: none); sets are {name, score, ...} for
--          every set the job's member is in among jobs, leases, the sets of the five states,
--          those of its type, those of its state when it is not one of the five, and the
--          further ones asked. types: per type {members of <p>:jobs:<type>:inactive, wake-up
--          tokens in <p>:<type>:jobs}.
-- Events   none.
-- Uses     lib/base (STATES, score, now_ms), lib/keys (k_job, k_types, k_type_state, k_tokens,
--          k_worker_leases),
--          lib/members (zid)
-- A key of the wrong Redis type reads as empty. kue_core/doctor/core.py calls this with small
-- batches, so that no call blocks Redis for long.
local p, n, t = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or not t then return redis.error_reply('KUE_INVALID inspect arguments are malformed') end

-- A read that gives false instead of failing on a key of the wrong type.
local function try(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then return false end
  return r
end

local FIELDS = { 'type', 'state', 'priority', 'promote_at', 'ttl', 'updated_at', 'created_at',
  'delay', 'workerId', 'stalls', 'lease' }
local jobs, types = {}, {}
local at = 4
for _ = 1, n do
  local id, m = ARGV[at], tonumber(ARGV[at + 1])
  at = at + 2
  local names = { 'jobs', 'leases' }
  for _ = 1, m do
    names[#names + 1] = ARGV[at]
    at = at + 1
  end
  local key = k_job(p, id)
  local kind = redis.call('TYPE', key).ok
  local fields = {}
  if kind == 'hash' then
    fields = redis.call('HMGET', key, unpack(FIELDS))
    local jtype, state = fields[1], fields[2]
    fields[#fields + 1] = redis.call('HEXISTS', key, 'data')
    fields[#fields + 1] = jtype and (try('SISMEMBER', k_types(p), jtype) or 0) or 0
    fields[#fields + 1] = redis.call('HEXISTS', key, 'fan_out')
    fields[#fields + 1] = fields[9] and try('ZSCORE', k_worker_leases(p), fields[9]) or false
    for s in pairs(STATES) do
      names[#names + 1] = 'jobs:' .. s
      if jtype then names[#names + 1] = 'jobs:' .. jtype .. ':' .. s end
    end
    if state and state ~= '' and not STATES[state] then
      names[#names + 1] = 'jobs:' .. state
      if jtype then names[#names + 1] = 'jobs:' .. jtype .. ':' .. state end
    end
  end
  local member, sets, seen = zid(id), {}, {}
  for _, name in ipairs(names) do
    if not seen[name] then
      seen[name] = true
      local score = try('ZSCORE', p .. ':' .. name, member)
      if score then
        sets[#sets + 1] = name; sets[#sets + 1] = score
      end
    end
  end
  jobs[#jobs + 1] = { id, kind, fields, sets }
end
for _ = 1, t do
  local jtype = ARGV[at]
  at = at + 1
  types[#types + 1] = {
    try('ZCARD', k_type_state(p, jtype, 'inactive')) or 0,
    try('LLEN', k_tokens(p, jtype)) or 0,
  }
end
return { now_ms(), jobs, types }

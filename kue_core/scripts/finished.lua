-- finished: a page of complete or failed jobs in the order they finished; writes nothing.
-- KEYS[1]  <p>:finished:<state> (finish time ms -> zid; every other key read is built from
--          the prefix, same slot)
-- ARGV[1]  prefix   ARGV[2] state: complete or failed   ARGV[3] type ('' = every type)
-- ARGV[4]  offset   ARGV[5] count   ARGV[6] '1' newest first, '' oldest first
-- Returns  the ids of the page.
-- Events   none.
-- Errors   KUE_INVALID for malformed arguments.
-- Uses     lib/keys (k_state, k_type_state), lib/members (zid_id)
-- The jobs are those of <p>:jobs:<state> (or <p>:jobs:<type>:<state>), in the order of their
-- finish times (ties by id); a job missing from KEYS[1] (finished by a Kue worker that does
-- not write it, until the retention sweep adds it) comes after those, by id. A call looks at
-- most at FINISHED_SCAN members one by one, so that a deep page of a type with many jobs
-- among more of other types cannot block Redis for long: past that, the page is cut short.
local p, state, jtype = ARGV[1], ARGV[2], ARGV[3]
local offset, count, newest = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1'
if (state ~= 'complete' and state ~= 'failed') or not offset or not count or offset < 0
    or count < 0 then
  return redis.error_reply('KUE_INVALID finished arguments are malformed')
end
local fkey = KEYS[1]
local skey = jtype == '' and k_state(p, state) or k_type_state(p, jtype, state)
local want, out, budget = offset + count, {}, FINISHED_SCAN

-- The members of `key` from rank `from`, a chunk of them, in the page's direction.
local function chunk(key, from, rev)
  if rev then return redis.call('ZREVRANGE', key, from, from + FINISHED_CHUNK - 1) end
  return redis.call('ZRANGE', key, from, from + FINISHED_CHUNK - 1)
end

-- Take `member` as the next job of the order: into the page once past the offset.
local seen = 0
local function take(member)
  seen = seen + 1
  if seen > offset then out[#out + 1] = zid_id(member) end
  return seen >= want
end

-- Pass 1, the jobs with a finish time: those of KEYS[1] that are in the state's set (every
-- one, without a type filter: the two are kept together).
local indexed = redis.call('ZCARD', fkey)
local total = redis.call('ZCARD', skey)
if jtype == '' then
  local members = newest and redis.call('ZREVRANGE', fkey, offset, want - 1)
    or redis.call('ZRANGE', fkey, offset, want - 1)
  for _, m in ipairs(members) do out[#out + 1] = zid_id(m) end
  seen = math.min(want, indexed)
elseif total <= FINISHED_CHUNK * 4 then
  -- A type with few jobs: read their finish times and sort them here.
  local members = redis.call('ZRANGE', skey, 0, -1)
  local scores = #members > 0 and redis.call('ZMSCORE', fkey, unpack(members)) or {}
  local found = {}
  for i, m in ipairs(members) do
    if scores[i] then found[#found + 1] = { tonumber(scores[i]), m } end
  end
  table.sort(found, function(a, b)
    if a[1] ~= b[1] then return (a[1] > b[1]) == newest end
    return (a[2] > b[2]) == newest
  end)
  for _, f in ipairs(found) do
    if take(f[2]) then return out end
  end
  indexed = #found
else
  -- Many jobs of the type: walk the finish times in order, keeping the type's.
  local matched, from = 0, 0
  while from < indexed and budget > 0 do
    local members = chunk(fkey, from, newest)
    if #members == 0 then break end
    local hit = redis.call('ZMSCORE', skey, unpack(members))
    for i, m in ipairs(members) do
      if hit[i] then
        matched = matched + 1
        if take(m) then return out end
      end
    end
    from, budget = from + #members, budget - #members
  end
  if from < indexed then return out end  -- the scan ran out: the page is cut short
  indexed = matched
end
if #out >= count or total <= indexed then return out end

-- Pass 2, the jobs without a finish time, by id in the page's direction.
local missing, from = {}, 0
while from < total and budget > 0 do
  local members = chunk(skey, from, false)
  if #members == 0 then break end
  local times = redis.call('ZMSCORE', fkey, unpack(members))
  for i, m in ipairs(members) do
    if not times[i] then missing[#missing + 1] = m end
  end
  from, budget = from + #members, budget - #members
end
table.sort(missing, function(a, b) return (a > b) == newest end)
for _, m in ipairs(missing) do
  if take(m) then break end
end
return out

-- Uses     no other part
-- Kue's zset member: two-digit length of the id, '|', the id ("01|7"); keeps FIFO per score.
local ZID_HEADS = { '01|', '02|', '03|', '04|', '05|', '06|', '07|', '08|', '09|', '10|',
  '11|', '12|', '13|', '14|', '15|', '16|', '17|', '18|', '19|', '20|' }
local function zid(id)
  local s = tostring(id)
  return (ZID_HEADS[#s] or string.format('%02d|', #s)) .. s
end

-- The id in a zid ("01|7" -> "7").
local function zid_id(member)
  return string.sub(member, (string.find(member, '|', 1, true) or 0) + 1)
end

-- Score in the global per-state set, as Kue 0.11 computes it.
local function state_score(state, priority, promote_at, ttl, now)
  if state == 'delayed' or state == 'suspended' then return promote_at end
  if state == 'active' then
    if ttl > 0 then return now + ttl end
    if priority < 0 then return priority end
    return -priority
  end
  return priority
end


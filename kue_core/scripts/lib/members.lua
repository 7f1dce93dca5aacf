-- Kue's zset member: two-digit length of the id, '|', the id ("01|7"); keeps FIFO per score.
local function zid(id)
  local s = tostring(id)
  return string.format('%02d|%s', #s, s)
end

-- The id in a zid ("01|7" -> "7").
local function zid_id(member)
  return string.sub(member, (string.find(member, '|', 1, true) or 0) + 1)
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


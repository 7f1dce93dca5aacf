-- Uses     lib/base, lib/keys, lib/members, lib/type_rules, lib/pins
-- Put a job into the sets of `state` (and wake a worker when it becomes inactive or pinned);
-- `group`: the job's group, or nil. A pinned job's `only` is read from its hash. `prefer`:
-- the job's field, false for none, or nil when the caller did not read it (read from the
-- hash then, for a type that has preferred jobs).
local function index_add(p, id, jtype, state, priority, promote_at, ttl, now, group, prefer)
  local member = zid(id)
  redis.call('ZADD', k_state(p, state), score(state_score(state, priority, promote_at, ttl, now)),
    member)
  redis.call('ZADD', k_type_state(p, jtype, state), score(priority), member)
  if group then group_add(p, member, jtype, state, priority, group, now) end
  if state == 'pinned' then
    pin_add(p, member, jtype, priority, redis.call('HGET', k_job(p, id), 'only'))
  elseif state == 'inactive' then
    redis.call('LPUSH', k_tokens(p, jtype), '1')
    if prefer == nil then
      local r = rule_of(p, jtype)
      prefer = r and r.prefer and redis.call('HGET', k_job(p, id), 'prefer')
    end
    if prefer then pin_add(p, member, jtype, priority, prefer) end
  elseif state == 'complete' or state == 'failed' then
    redis.call('ZADD', k_finished(p, state), int(now), member)  -- by finish time, for retention
  end
end

-- Take a job out of the sets of `state`; `group`: its group, `prefer`: its field (nil: none).
local function index_remove(p, id, jtype, state, group, prefer)
  local member = zid(id)
  redis.call('ZREM', k_state(p, state), member)
  redis.call('ZREM', k_type_state(p, jtype, state), member)
  if state == 'complete' or state == 'failed' then
    redis.call('ZREM', k_finished(p, state), member)
  elseif state == 'pinned' then
    for _, w in ipairs(pin_list(redis.call('HGET', k_job(p, id), 'only'))) do
      redis.call('ZREM', k_places(p, jtype, w), member)
    end
  elseif group and state == 'inactive' then
    local set = k_group(p, jtype, group)
    redis.call('ZREM', set, member)
    if redis.call('EXISTS', set) == 0 then redis.call('ZREM', k_groups(p, jtype), group) end
  elseif group and state == 'active' then
    redis.call('ZREM', k_group_active(p, jtype, group), member)
  end
  if prefer and state == 'inactive' then
    for _, w in ipairs(pin_list(prefer)) do redis.call('ZREM', k_places(p, jtype, w), member) end
  end
end


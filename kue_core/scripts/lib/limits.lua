-- Uses     lib/keys, lib/type_rules
-- Limits (see kue_core/features/limits.py). The starts of a rate-limited type (or group) are logged in
-- a zset (member id:lease, score = start ms), trimmed to the window at each look.
-- How long (ms) until a start fits under `limit` ({max, per ms}) in the log `key`, or nil.
local function rate_wait(key, limit, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - limit[2])
  if redis.call('ZCARD', key) < limit[1] then return nil end
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(first[2]) + limit[2] - now)
end

-- How long (ms) the type's rules `r` hold its claims back, or nil when a job may start.
local function type_wait(p, jtype, r, now)
  if r['until'] then
    if r['until'] > now then return r['until'] - now end
    r['until'] = nil  -- the hold is over: the claims after this one need not read it
    set_rule(p, jtype, r)
  end
  if r.concurrency and redis.call('ZCARD', k_type_state(p, jtype, 'active')) >= r.concurrency
  then
    return LIMIT_RECHECK_MS
  end
  if r.rate then return rate_wait(k_rate(p, jtype), r.rate, now) end
  return nil
end

-- How long (ms) the group limits of `r` hold group `g` back, or nil.
local function group_wait(p, jtype, g, r, now)
  if r.group_concurrency
    and redis.call('ZCARD', k_group_active(p, jtype, g)) >= r.group_concurrency then
    return LIMIT_RECHECK_MS
  end
  if r.group_rate then return rate_wait(k_group_rate(p, jtype, g), r.group_rate, now) end
  return nil
end

-- Log a start (`start`: id:lease) under the rate limits of `r`.
local function count_start(p, jtype, r, group, start, now)
  if r.rate then
    local key = k_rate(p, jtype)
    redis.call('ZADD', key, now, start)
    redis.call('PEXPIRE', key, r.rate[2])
  end
  if group and r.group_rate then
    local key = k_group_rate(p, jtype, group)
    redis.call('ZADD', key, now, start)
    redis.call('PEXPIRE', key, r.group_rate[2])
  end
end


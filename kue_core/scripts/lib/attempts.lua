-- Uses     lib/base, lib/keys, lib/type_rules, lib/indexes
-- The fields a transition needs from a job hash, or nil when the job does not exist.
local function load_job(key)
  local h = redis.call('HMGET', key, 'type', 'state', 'priority', 'promote_at', 'ttl', 'attempts',
    'group', 'only', 'fan_out', 'prefer')
  if not h[1] then return nil end
  return {
    type = h[1],
    state = h[2] or '',
    priority = tonumber(h[3]) or 0,
    promote_at = tonumber(h[4]) or 0,
    ttl = tonumber(h[5]) or 0,
    attempts = tonumber(h[6]) or 0,
    group = h[7] or nil,
    only = h[8] or nil,
    fan_out = h[9] or nil,
    prefer = h[10] or nil,
  }
end

-- The attempts made at a job once one more ended (`made` and `most`: its hash's attempts and
-- max_attempts), counted as Kue's Job#attempt counts them: up to max_attempts and never past
-- it, since Kue clients show remaining = max - made.
local function next_attempt(made, most)
  made = made and tonumber(made) or 0  -- (none yet: no call of tonumber)
  if made < (tonumber(most) or MAX_ATTEMPTS) then return made + 1 end
  return made
end

-- Count one more attempt at the job stored at `key` (see next_attempt); returns the count.
local function count_attempt(key)
  local h = redis.call('HMGET', key, 'attempts', 'max_attempts')
  local made = next_attempt(h[1], h[2])
  redis.call('HSET', key, 'attempts', int(made))
  return made
end

-- Note that `jtype` has grouped jobs: its claims take turns between groups from now on.
local function mark_grouped(p, jtype)
  if mark_rule(p, jtype, 'groups') then
    redis.call('ZADD', k_groups(p, jtype), 'NX', 0, LANE)
  end
end

-- Move an active job (of group `group`, or nil) out of `active`: drop its active index
-- entries; under a concurrency limit, wake a slot waiting for a place. (Its worker's process
-- lease holds it: nothing per job to drop. An entry of <p>:leases left by a worker of the
-- version before is left to recover.lua, which drops it once expired.)
local function leave_active(p, id, jtype, group)
  index_remove(p, id, jtype, 'active', group)
  local r = rule_of(p, jtype)
  if r and (r.concurrency or (group and r.group_concurrency)) then
    wake_one(k_limited(p, jtype))
  end
end

-- The label of the duration bucket of `ms` (DURATION_BUCKETS_MS, as Prometheus's `le`).
local function bucket(ms)
  for _, le in ipairs(DURATION_BUCKETS_MS) do
    if ms <= le then return int(le) end
  end
  return 'inf'
end

-- Count a job that ended `outcome` ('complete' or 'failed'): this minute's counter (kept
-- MINUTE_COUNTER_TTL seconds), the totals per type, and for a completed job the duration
-- histogram (buckets DURATION_BUCKETS_MS, labelled as Prometheus's `le`).
local function count_outcome(p, jtype, outcome, now, duration)
  local key = k_minute(p, outcome, int(math.floor(now / 60000)))
  if redis.call('INCR', key) == 1 then redis.call('EXPIRE', key, MINUTE_COUNTER_TTL) end
  redis.call('HINCRBY', k_totals(p), outcome .. ':' .. jtype, 1)
  if duration then
    redis.call('HINCRBY', k_totals(p), 'le:' .. bucket(duration), 1)
  end
end


-- Uses     lib/keys
-- The member of <p>:groups:<type> that stands for the type's jobs in no group: at its turn
-- the claim takes the best job of the type's set, in a group or not (no group name can be
-- it: names have no control characters).
local LANE = '\0'
-- The job events a type's feed may carry (see kue_core/features/feeds.py).
local FEED_EVENTS = { complete = true, failed = true }

-- Flow rules (see kue_core/features/limits.py): <p>:limits maps a type to a JSON object: `rate`
-- ({max, per ms}), `concurrency`, `group_rate`, `group_concurrency`, `until` (ms: held back
-- until then, by RateLimited), `paused` (see pause.lua), `groups` (it has grouped jobs),
-- `feeds` ({event = true}: its job events that go to <p>:feed:<event>:<type>, see feeds.py).
-- Read once per script call (rules_read, emptied by the closing code below: a Redis function
-- keeps the library's locals between calls); a type without any costs one HGET per claim,
-- the read of its paused flag.
local rules_read

-- The rules of `jtype`, or false.
local function rule_of(p, jtype)
  local r = rules_read[jtype]
  if r == nil then
    local text = redis.call('HGET', k_limits(p), jtype)
    r = text and cjson.decode(text) or false
    rules_read[jtype] = r
  end
  return r
end

-- Store the rules of `jtype` (none left: the field goes).
local function set_rule(p, jtype, r)
  if next(r) == nil then
    redis.call('HDEL', k_limits(p), jtype)
    rules_read[jtype] = false
  else
    redis.call('HSET', k_limits(p), jtype, cjson.encode(r))
    rules_read[jtype] = r
  end
end

-- Set flag `flag` in the rules of `jtype` (a feature its claims look for from now on: a type
-- without pays nothing); returns true when it was not set yet.
local function mark_rule(p, jtype, flag)
  local r = rule_of(p, jtype)
  if r and r[flag] then return false end
  r = r or {}
  r[flag] = true
  set_rule(p, jtype, r)
  return true
end

-- Groups (see kue_core/features/limits.py): a job of group `g` (hash field `group`) also waits in
-- <p>:group:<type>:<g> (zid by priority, as in Kue's sets) and runs in
-- <p>:group-active:<type>:<g> (zid by start time); <p>:groups:<type> holds the groups with
-- jobs waiting, scored by their turn (the least recently served first).
local function group_add(p, member, jtype, state, priority, g, now)
  if state == 'inactive' then
    redis.call('ZADD', k_group(p, jtype, g), priority, member)
    local rot = k_groups(p, jtype)
    if not redis.call('ZSCORE', rot, g) then
      local last = redis.call('ZRANGE', rot, -1, -1, 'WITHSCORES')
      redis.call('ZADD', rot, (tonumber(last[2]) or 0) + 1, g)  -- its turn comes last
    end
  elseif state == 'active' then
    redis.call('ZADD', k_group_active(p, jtype, g), now, member)
  end
end

-- Push a token on wake-up list `key` whose tokens are taken (each lets one waiting slot claim
-- again): at most LIMIT_WAKE_MAX kept, for LIMIT_RECHECK_MS (for the slots waiting now, not
-- later ones).
local function wake_one(key)
  redis.call('LPUSH', key, 1)
  redis.call('LTRIM', key, 0, LIMIT_WAKE_MAX - 1)
  redis.call('PEXPIRE', key, LIMIT_RECHECK_MS)
end

-- Pinning (see kue_core/features/pins.py). A job saved with `only` (hash field: a JSON list of worker
-- ids) may be run by those workers alone. Waiting, it is in state `pinned` (indexed as Kue's
-- states are, so that no worker that does not know pinning takes it, Node Kue's included)
-- and in <p>:places:<type>:<worker> of each of its workers (zid by priority), which is where
-- their claims find it; a push on <p>:wake:<type>:<worker> wakes an idle slot of theirs.


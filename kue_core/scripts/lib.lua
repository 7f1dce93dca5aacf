-- lib.lua: helpers prepended to every kue script when it is loaded (see kue_core/scripts.py).
-- Key names mirror kue_core/keys.py; tests/scripts/test_layout.py checks that they agree.
-- Constants in capitals (HISTORY_LENGTH, DURATION_BUCKETS_MS...) are not defined here: they
-- come from kue_core/defaults.py, in a preamble scripts.py puts ahead of this file.

-- Milliseconds since the epoch on the Redis server's clock: one clock for every worker.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers as plain decimal text (Lua would print large numbers in exponent form).
local function int(n)
  return string.format('%d', n)
end

local STATES = { inactive = true, active = true, complete = true, failed = true, delayed = true,
  blocked = true, pinned = true }

local function k_job(p, id) return p .. ':job:' .. id end
local function k_log(p, id) return p .. ':job:' .. id .. ':log' end
local function k_history(p, id) return p .. ':job:' .. id .. ':history' end
local function k_jobs(p) return p .. ':jobs' end
local function k_state(p, state) return p .. ':jobs:' .. state end
local function k_type_state(p, jtype, state) return p .. ':jobs:' .. jtype .. ':' .. state end
local function k_types(p) return p .. ':job:types' end
local function k_tokens(p, jtype) return p .. ':' .. jtype .. ':jobs' end
local function k_events(p) return p .. ':events' end
local function k_leases(p) return p .. ':leases' end
local function k_workers(p) return p .. ':workers' end
local function k_worker(p, wid) return p .. ':worker:' .. wid end
local function k_promote(p) return p .. ':promote' end
local function k_work_time(p) return p .. ':stats:work-time' end
local function k_paused(p) return p .. ':paused' end
local function k_fence(p) return p .. ':fence' end
local function k_resumed(p, jtype) return p .. ':' .. jtype .. ':resumed' end
local function k_totals(p) return p .. ':stats:totals' end
local function k_minute(p, outcome, minute) return p .. ':stats:' .. outcome .. ':' .. minute end
local function k_control(p, wid) return p .. ':control:' .. wid end
local function k_unique(p, key) return p .. ':unique:' .. key end
local function k_unique_jobs(p) return p .. ':unique:jobs' end
local function k_tag(p, tag) return p .. ':tag:' .. tag end
local function k_tags(p) return p .. ':tags' end
local function k_tracked(p) return p .. ':tracked' end
local function k_word(p, word) return p .. ':words:' .. word end
local function k_words(p) return p .. ':words' end
local function k_finished(p, state) return p .. ':finished:' .. state end
local function k_retention(p) return p .. ':retention' end
local function k_deps(p, id) return p .. ':job:' .. id .. ':deps' end
local function k_dependents(p, id) return p .. ':job:' .. id .. ':dependents' end
local function k_results(p, id) return p .. ':job:' .. id .. ':results' end
local function k_awaited(p) return p .. ':awaited' end
local function k_schedules(p) return p .. ':schedules' end
local function k_schedule(p, key) return p .. ':schedule:' .. key end
local function k_limits(p) return p .. ':limits' end
local function k_feed(p, event, jtype) return p .. ':feed:' .. event .. ':' .. jtype end
local function k_rate(p, jtype) return p .. ':rate:' .. jtype end
local function k_limited(p, jtype) return p .. ':' .. jtype .. ':limited' end
local function k_groups(p, jtype) return p .. ':groups:' .. jtype end
local function k_group(p, jtype, g) return p .. ':group:' .. jtype .. ':' .. g end
local function k_group_active(p, jtype, g) return p .. ':group-active:' .. jtype .. ':' .. g end
local function k_group_rate(p, jtype, g) return p .. ':group-rate:' .. jtype .. ':' .. g end
local function k_places(p, jtype, wid) return p .. ':places:' .. jtype .. ':' .. wid end
local function k_wake(p, jtype, wid) return p .. ':wake:' .. jtype .. ':' .. wid end
local function k_runs(p, id) return p .. ':job:' .. id .. ':runs' end
local function k_run_leases(p) return p .. ':run-leases' end
local function k_open(p, jtype) return p .. ':open:' .. jtype end
local function k_late(p, jtype) return p .. ':late:' .. jtype end

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

-- The member of <p>:groups:<type> that stands for the type's jobs in no group: at its turn
-- the claim takes the best job of the type's set, in a group or not (no group name can be
-- it: names have no control characters).
local LANE = '\0'
-- The job events a type's feed may carry (see kue_core/feeds.py).
local FEED_EVENTS = { complete = true, failed = true }

-- Flow rules (see kue_core/limits.py): <p>:limits maps a type to a JSON object: `rate`
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

-- Groups (see kue_core/limits.py): a job of group `g` (hash field `group`) also waits in
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

-- Pinning (see kue_core/pins.py). A job saved with `only` (hash field: a JSON list of worker
-- ids) may be run by those workers alone. Waiting, it is in state `pinned` (indexed as Kue's
-- states are, so that no worker that does not know pinning takes it, Node Kue's included)
-- and in <p>:places:<type>:<worker> of each of its workers (zid by priority), which is where
-- their claims find it; a push on <p>:wake:<type>:<worker> wakes an idle slot of theirs.

-- The worker ids of an `only` field (nil or not a list: none).
local function pin_list(text)
  if not text then return {} end
  local ok, value = pcall(cjson.decode, text)
  if ok and type(value) == 'table' then return value end
  return {}
end

-- A waiting job's state: `pinned` when it has workers of its own (`only`: its field), else
-- `inactive`.
local function waiting(only)
  if only then return 'pinned' end
  return 'inactive'
end

-- Note that `jtype` has jobs in workers' places: its claims look at them from now on.
local function mark_pins(p, jtype)
  if mark_rule(p, jtype, 'pins') then
    -- Its idle slots wait on the type's tokens alone so far: one wakes them to claim again
    -- and learn to wait on their own lists too.
    redis.call('LPUSH', k_tokens(p, jtype), 1)
  end
end

-- Offer pinned job `member` to each of its workers (`only`: its field).
local function pin_add(p, member, jtype, priority, only)
  for _, w in ipairs(pin_list(only)) do
    redis.call('ZADD', k_places(p, jtype, w), priority, member)
    wake_one(k_wake(p, jtype, w))
  end
  mark_pins(p, jtype)
end

-- Re-score pinned job `id` at `priority` in its workers' places (or, given `prefer`, its
-- field, a preferred job waiting inactive in its preferred workers' places).
local function pin_rescore(p, id, jtype, priority, prefer)
  for _, w in ipairs(pin_list(prefer or redis.call('HGET', k_job(p, id), 'only'))) do
    redis.call('ZADD', k_places(p, jtype, w), 'XX', priority, zid(id))
  end
end

-- Preferred workers (see kue_core/pins.py). A job saved with `prefer` (hash field: a JSON list
-- of worker ids) may be run by any worker and waits inactive, in Kue's sets; it is also in
-- <p>:places:<type>:<worker> of each preferred worker, so that their claims find it first at
-- equal priority (see pick). Whoever claims it, it leaves them all (claim_member); every way
-- back to inactive puts it back. Its type's rules have `prefer` (and `pins`).

-- Put a job into the sets of `state` (and wake a worker when it becomes inactive or pinned);
-- `group`: the job's group, or nil. A pinned job's `only` is read from its hash. `prefer`:
-- the job's field, false for none, or nil when the caller did not read it (read from the
-- hash then, for a type that has preferred jobs).
local function index_add(p, id, jtype, state, priority, promote_at, ttl, now, group, prefer)
  local member = zid(id)
  redis.call('ZADD', k_state(p, state), state_score(state, priority, promote_at, ttl, now), member)
  redis.call('ZADD', k_type_state(p, jtype, state), priority, member)
  if group then group_add(p, member, jtype, state, priority, group, now) end
  if state == 'pinned' then
    pin_add(p, member, jtype, priority, redis.call('HGET', k_job(p, id), 'only'))
  elseif state == 'inactive' then
    redis.call('LPUSH', k_tokens(p, jtype), 1)
    if prefer == nil then
      local r = rule_of(p, jtype)
      prefer = r and r.prefer and redis.call('HGET', k_job(p, id), 'prefer')
    end
    if prefer then pin_add(p, member, jtype, priority, prefer) end
  elseif state == 'complete' or state == 'failed' then
    redis.call('ZADD', k_finished(p, state), now, member)  -- by finish time, for retention
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

-- Publish a Kue event: {"id":<id>,"event":"<name>","args":["<name>", ...],"type":"<type>"}
-- (`type` is ours: Kue's listeners ignore it; it lets a stream filter by type).
-- `extra` is the JSON text of the further arguments, comma separated ('' for none).
-- A feed's event (FEED_EVENTS) of a type with that feed also goes, as "<type>/<id>", to the
-- feed's list, where kue rules takes it; the rules were read already by the transitions that
-- end a job (leave_active), so a type without feeds pays nothing more there.
local function publish(p, id, jtype, event, extra)
  local args = '"' .. event .. '"'
  if extra ~= '' then args = args .. ',' .. extra end
  redis.call('PUBLISH', k_events(p), '{"id":' .. tostring(id) .. ',"event":"' .. event
    .. '","args":[' .. args .. '],"type":' .. cjson.encode(jtype) .. '}')
  if FEED_EVENTS[event] then
    local r = rule_of(p, jtype)
    if r and r.feeds and r.feeds[event] then
      redis.call('LPUSH', k_feed(p, event, jtype), jtype .. '/' .. tostring(id))
    end
  end
end

-- A job saved waiting (inactive, or delayed) has no history key until its first transition:
-- that key would be a third of a waiting job's memory. Its save entry follows from its hash
-- (state delayed when it has a delay, at its creation), and the first entry written puts it
-- first. Node Kue's jobs read the same. kue_core/queue_records.py's history() reads it alike.
-- `h`: the job's {created_at, delay}.
local function saved_entry(h)
  if not h[1] then return nil end
  local state = (tonumber(h[2]) or 0) > 0 and 'delayed' or 'inactive'
  return cjson.encode({ state = state, at = tonumber(h[1]) })
end

-- The trail: a plain job's claim and completion write no history entry. The claim writes
-- the hash field `trail` ("<started_at>,<attempt>") with its other fields, and the completion
-- adds ",<completed_at>,<duration>,<attempt>": so a job that runs once and completes never
-- has a history key. The entries stand for {state active, at, worker, attempt} and {state
-- complete, at, worker, attempt, duration}, the worker being the job's workerId (which only
-- claims change: a claim that finds a trail writes it out first). Every other entry written
-- writes the trail out ahead of it (see history). kue_core/queue_records.py reads it alike.
local function trail_entries(trail, worker)
  local v = {}
  for x in string.gmatch(trail, '[^,]+') do v[#v + 1] = tonumber(x) end
  if not (v[1] and v[2]) then return {} end  -- not ours
  local out = { cjson.encode({ state = 'active', at = v[1], worker = worker, attempt = v[2] }) }
  if v[5] then
    out[2] = cjson.encode({ state = 'complete', at = v[3], worker = worker, attempt = v[5],
      duration = v[4] })
  end
  return out
end

-- Append `entry` (or nothing, when nil) to the job's transition history, after its trail,
-- keeping the last HISTORY_LENGTH.
local function history(p, id, entry)
  local key, jkey = k_history(p, id), k_job(p, id)
  local h = redis.call('HMGET', jkey, 'trail', 'workerId', 'created_at', 'delay')
  local entries = {}
  if h[1] then
    entries = trail_entries(h[1], h[2])
    redis.call('HDEL', jkey, 'trail')
  end
  if entry then entries[#entries + 1] = cjson.encode(entry) end
  if #entries == 0 then return end
  local n = redis.call('RPUSH', key, unpack(entries))
  if n == #entries then
    local saved = saved_entry({ h[3], h[4] })
    if saved then n = redis.call('LPUSH', key, saved) end
  end
  if n > HISTORY_LENGTH then
    redis.call('LTRIM', key, -HISTORY_LENGTH, -1)
  end
end

-- Before a change to a waiting job's delay: write its save entry while the hash still tells it.
local function keep_saved(p, id)
  local key = k_history(p, id)
  if redis.call('EXISTS', key) == 0 then
    local saved = saved_entry(redis.call('HMGET', k_job(p, id), 'created_at', 'delay'))
    if saved then redis.call('RPUSH', key, saved) end
  end
end

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
  made = tonumber(made) or 0
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

-- Move an active job (of group `group`, or nil) out of `active`: drop its lease and its
-- active index entries; under a concurrency limit, wake a slot waiting for a place.
local function leave_active(p, id, jtype, group)
  redis.call('ZREM', k_leases(p), zid(id))
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

-- Unique keys (see kue_core/unique.py). A job saved with one has the hash fields `unique`
-- (the key) and `unique_mode`. until_done and debounce keys (<p>:unique:<key>, the holder's
-- id) are released when the job ends (complete, failed for good, cancelled, removed); throttle
-- keys only expire; reuse keys (kue-unique's hash <p>:unique:jobs) go with the job.
local function releases_at_end(mode)
  return mode == 'until_done' or mode == 'debounce'
end

-- Release the key the job `id` holds, if it still holds it (the key may have expired and been
-- taken by another job meanwhile). `key` and `mode` as the hash has them (nil for none).
local function release_unique(p, id, key, mode)
  if key and releases_at_end(mode) then
    local k = k_unique(p, key)
    if redis.call('GET', k) == tostring(id) then redis.call('DEL', k) end
  end
end

-- Read the job's unique key and release it (the ends that do not read the hash themselves).
-- Returns the job's {unique, unique_mode, keep_failed, dependents}.
local function release_unique_of(p, id)
  local u = redis.call('HMGET', k_job(p, id), 'unique', 'unique_mode', 'keep_failed',
    'dependents')
  release_unique(p, id, u[1], u[2])
  return u
end

-- Dependencies (see kue_core/flows.py). A job saved with dependencies has the hash fields
-- `depends` (how many) and `on_dep_fail` (its policy when one fails for good: absent = wait,
-- 'fail', 'ignore'), and <p>:job:<id>:deps, a zset of the ids it depends on: score 0 while it
-- waits for that job, 1 once that job completed (or failed, under 'ignore'). The results of
-- those that completed are in <p>:job:<id>:results (id -> result JSON). A job others depend on
-- has `dependents` = 1 and <p>:job:<id>:dependents (their ids), and is in <p>:awaited (score:
-- when the sweep last looked) until it ends, so that the sweep sees it end when a Node Kue
-- worker ends it. A job saved waiting is in state 'blocked' until it waits for none.

-- Move blocked job `did` (`h`: its type, priority, promote_at, delay, and group at h[7], only
-- at h[8], prefer at h[9]) to inactive (pinned, for a job with workers of its own), or to
-- delayed while its due time is ahead (a due time stays; a delay in ms counts from now).
local function unblock(p, did, h, now)
  local at = tonumber(h[3]) or 0
  if at == 0 and (tonumber(h[4]) or 0) > 0 then at = now + tonumber(h[4]) end
  local state = waiting(h[8])
  if at > now then state = 'delayed' else at = now end
  index_remove(p, did, h[1], 'blocked')
  redis.call('HSET', k_job(p, did), 'state', state, 'promote_at', int(at), 'updated_at',
    int(now))
  index_add(p, did, h[1], state, tonumber(h[2]) or 0, at, 0, now, h[7], h[9] or false)
  history(p, did, { state = state, at = now, from = 'blocked', unblocked = true })
  publish(p, did, h[1], 'unblocked', '')
  if state == 'delayed' then
    redis.call('PUBLISH', k_promote(p), int(at))
  else
    publish(p, did, h[1], 'enqueue', cjson.encode(h[1]))
  end
end

-- Job `id`, a dependency of `did`, is done (completed with `result`, its JSON; or failed
-- under the policy ignore, `result` nil): `did` no longer waits for it, and is unblocked when
-- it waits for no other. Once per pair: a second call changes nothing but the result kept.
local function dep_done(p, did, id, result, now)
  local key, deps = k_job(p, did), k_deps(p, did)
  local h = redis.call('HMGET', key, 'type', 'priority', 'promote_at', 'delay', 'state',
    'blocked_by', 'group', 'only', 'prefer')
  if not h[1] then return end  -- removed by a Node Kue client: kue doctor's to tidy
  if result then redis.call('HSET', k_results(p, did), id, result) end
  if redis.call('ZADD', deps, 'XX', 'CH', 1, id) == 0 then return end
  if h[6] == tostring(id) then redis.call('HDEL', key, 'blocked_by') end
  if h[5] == 'blocked' and redis.call('ZCOUNT', deps, 0, 0) == 0 then unblock(p, did, h, now) end
end

-- Every job waiting for job `id` stops waiting for it: `id` completed with `result` (JSON).
local function deps_complete(p, id, result, now)
  redis.call('ZREM', k_awaited(p), zid(id))
  for _, did in ipairs(redis.call('SMEMBERS', k_dependents(p, id))) do
    dep_done(p, did, id, result, now)
  end
end

-- Blocked job `did`, waiting for job `fid`, which failed for good, follows its policy
-- (`policy`: its on_dep_fail): ignore (as if `fid` were done), fail (it fails at once; its id
-- goes on the list `failed`, for its own dependents), or wait (it stays blocked, with
-- `blocked_by` = fid, until `fid`, retried, completes).
local function dep_failed(p, did, fid, policy, now, failed)
  if policy == 'ignore' then
    dep_done(p, did, fid, nil, now)
    return
  end
  local key = k_job(p, did)
  if policy ~= 'fail' then
    redis.call('HSET', key, 'blocked_by', fid)
    history(p, did, { state = 'blocked', at = now, blocked_by = tonumber(fid) })
    return
  end
  local message = 'dependency ' .. fid .. ' failed'
  local h = redis.call('HMGET', key, 'type', 'priority')
  index_remove(p, did, h[1], 'blocked')
  redis.call('HSET', key, 'state', 'failed', 'error', message, 'failed_at', int(now),
    'updated_at', int(now))
  index_add(p, did, h[1], 'failed', tonumber(h[2]) or 0, 0, 0, now)
  history(p, did, { state = 'failed', at = now, from = 'blocked', error = message })
  count_outcome(p, h[1], 'failed', now, nil)
  publish(p, did, h[1], 'error', cjson.encode(message))
  publish(p, did, h[1], 'failed', cjson.encode(message))
  failed[#failed + 1] = did
end

-- Job `id` failed for good (a worker's last attempt, a stall, a cancel, or by hand): each job
-- blocked waiting for it follows its policy (see dep_failed), and so on down for those that
-- fail in turn.
local function deps_failed(p, id, now)
  local failed, i = { id }, 1
  while i <= #failed do
    local fid = failed[i]
    i = i + 1
    redis.call('ZREM', k_awaited(p), zid(fid))
    for _, did in ipairs(redis.call('SMEMBERS', k_dependents(p, fid))) do
      local h = redis.call('HMGET', k_job(p, did), 'state', 'on_dep_fail')
      if h[1] == 'blocked' and redis.call('ZSCORE', k_deps(p, did), fid) == '0' then
        dep_failed(p, did, fid, h[2], now, failed)
      end
    end
  end
end

-- If job `id`, awaited by others, has ended (complete, failed, or gone: removed without our
-- scripts), its dependents follow as if our scripts had ended it; returns whether it had.
local function awaited_ended(p, id, now)
  local h = redis.call('HMGET', k_job(p, id), 'state', 'result')
  if h[1] == 'complete' then
    deps_complete(p, id, h[2] or 'null', now)
  elseif h[1] == 'failed' or not h[1] then
    deps_failed(p, id, now)
  else
    return false
  end
  return true
end

-- Job `id` (stored at `key`, flags `u` as release_unique_of gives them) just ended `state`
-- ('complete' or 'failed') without a worker's report: the jobs that depend on it follow.
local function deps_ended(p, id, key, u, state, now)
  if not u[4] then return end
  if state == 'complete' then
    deps_complete(p, id, redis.call('HGET', key, 'result') or 'null', now)
  else
    deps_failed(p, id, now)
  end
end

-- Tell worker process `wid` that its attempt at job `id` under lease `token` was ended by
-- hand (cancelled, moved): it stops the handler at once. The caller has taken the job out of
-- active already, so that worker's reports are refused by the token whatever it does; a
-- worker that misses the message finds the lease lost at its next heartbeat.
local function tell_worker(p, wid, id, token, reason)
  if not wid or wid == '' then return end
  redis.call('PUBLISH', k_control(p, wid),
    cjson.encode({ op = 'end', id = id, lease = token or '', reason = reason }))
end

-- Fan-out jobs (see kue_core/runs.py). A job with `fan_out` (k, a hash field) must succeed
-- on k distinct worker processes, each a run: <p>:job:<id>:runs maps a worker id to its run
-- as JSON ({state = running, complete, failed or lost, token, started_at, ended_at, result or
-- error, tries}). A run's token is the job's `lease` counter, bumped at each run's start; its
-- lease is in <p>:run-leases (member <id>@<worker>). From its first run until it ends the job
-- is active (not in <p>:leases) and offers its open places (runs_offer): in the places of each
-- eligible worker of its `only`, or in <p>:open:<type> for a job without workers of its own.
-- The hash also keeps at_once (absent: k), max_failed_runs, late ('1': late joiners join,
-- through <p>:late:<type>), runs_done and runs_failed. Its type's rules have `fanout`.

-- The runs of fan-out job `id`: worker id -> run (a table), and worker id -> its JSON text.
local function runs_of(p, id)
  local flat = redis.call('HGETALL', k_runs(p, id))
  local runs, texts = {}, {}
  for i = 1, #flat, 2 do
    local ok, run = pcall(cjson.decode, flat[i + 1])
    if ok and type(run) == 'table' then
      runs[flat[i]] = run
      texts[flat[i]] = flat[i + 1]
    end
  end
  return runs, texts
end

-- The run of worker `w` of fan-out job `id`, decoded, or nil.
local function run_of(p, id, w)
  local ok, run = pcall(cjson.decode, redis.call('HGET', k_runs(p, id), w) or '')
  if ok and type(run) == 'table' then return run end
  return nil
end

-- Store `run` of worker `w`; `result`: the JSON text of a completed run's result, kept as it
-- is (not decoded and encoded again) at the end of the record, where run_result finds it.
local function run_put(p, id, w, run, result)
  local text = cjson.encode(run)
  if result then text = string.sub(text, 1, -2) .. ',"result":' .. result .. '}' end
  redis.call('HSET', k_runs(p, id), w, text)
end

-- The result JSON text kept in a completed run's record (see run_put), or 'null'.
local function run_result(text)
  local at = string.find(text, ',"result":', 1, true)
  if not at then return 'null' end
  return string.sub(text, at + 10, -2)
end

-- The worker and run of job `id` whose token is `token` and that is running, or nil.
local function run_by_token(p, id, token)
  for w, run in pairs(runs_of(p, id)) do
    if run.state == 'running' and run.token == token then return w, run end
  end
  return nil
end

-- Whether worker `w` may start a run of a job whose runs are `runs`: it has none, or its
-- run failed or was lost.
local function run_eligible(runs, w)
  local run = runs[w]
  return not run or run.state == 'failed' or run.state == 'lost'
end

-- End run `run` of worker `w` as `state` (complete, failed or lost) and drop its lease.
local function run_end(p, id, w, run, state, now, result)
  run.state = state
  run.ended_at = now
  run_put(p, id, w, run, result)
  redis.call('ZREM', k_run_leases(p), id .. '@' .. w)
end

-- Offer the open places of fan-out job `id` to the workers that may take one, and take it
-- out of the places of those that may not: open = min(k - done - running, at_once -
-- running) while the job is active, else none. Wakes the workers it newly offers a place.
-- Returns how many sets it added the job to or took it out of.
local function runs_offer(p, id)
  local h = redis.call('HMGET', k_job(p, id), 'type', 'priority', 'only', 'fan_out', 'at_once',
    'runs_done', 'state')
  local jtype, priority, k = h[1], tonumber(h[2]) or 0, tonumber(h[4]) or 0
  local runs = runs_of(p, id)
  local running = 0
  for _, run in pairs(runs) do
    if run.state == 'running' then running = running + 1 end
  end
  local open = math.min(k - (tonumber(h[6]) or 0), tonumber(h[5]) or k) - running
  if h[7] ~= 'active' then open = 0 end
  local member, changed = zid(id), 0
  if h[3] then
    for _, w in ipairs(pin_list(h[3])) do
      local places = k_places(p, jtype, w)
      if open > 0 and run_eligible(runs, w) then
        if redis.call('ZADD', places, priority, member) == 1 then
          wake_one(k_wake(p, jtype, w))
          changed = changed + 1
        end
      else
        changed = changed + redis.call('ZREM', places, member)
      end
    end
  elseif open > 0 then
    if redis.call('ZADD', k_open(p, jtype), priority, member) == 1 then
      redis.call('LPUSH', k_tokens(p, jtype), 1)  -- wakes an idle slot of the type
      changed = changed + 1
    end
  else
    changed = changed + redis.call('ZREM', k_open(p, jtype), member)
  end
  return changed
end

-- Fan-out job `id` (of `jtype`, workers `only`: its field) ends or leaves its type: it is in
-- no open set, no worker's places and no late set any more.
local function runs_close(p, id, jtype, only)
  local member = zid(id)
  redis.call('ZREM', k_open(p, jtype), member)
  redis.call('ZREM', k_late(p, jtype), member)
  for _, w in ipairs(pin_list(only)) do redis.call('ZREM', k_places(p, jtype, w), member) end
end

-- Stop every running run of fan-out job `id`: it is lost, its lease goes, and its worker is
-- told on its control channel (with the run's token) so that its attempt ends at once.
local function stop_runs(p, id, reason, now)
  for w, run in pairs(runs_of(p, id)) do
    if run.state == 'running' then
      run_end(p, id, w, run, 'lost', now)
      tell_worker(p, w, id, run.token, reason)
    end
  end
end

-- Fan-out job `id` (`job` as load_job gives it) leaves active by hand, or ends otherwise
-- than by its runs: its runs stop, and it offers places no more.
local function runs_leave(p, id, job, reason, now)
  stop_runs(p, id, reason, now)
  runs_close(p, id, job.type, job.only)
end

-- A publish with reset_runs landed on active fan-out job `id` (at `key`; see save_unique):
-- its failed runs are dropped and runs_failed is 0, so that their workers may try again
-- within a fresh max_failed_runs; complete, running and lost runs stay. Its open places are
-- offered again.
local function runs_retry(p, id, key, now)
  local dropped = {}
  for w, run in pairs(runs_of(p, id)) do
    if run.state == 'failed' then dropped[#dropped + 1] = w end
  end
  if #dropped > 0 then redis.call('HDEL', k_runs(p, id), unpack(dropped)) end
  redis.call('HSET', key, 'runs_failed', '0')
  history(p, id, { state = 'active', at = now, reset_runs = #dropped })
  runs_offer(p, id)
end

-- Fan-out job `id` (at `key`, of `jtype` at `priority`) waits again by hand (a move back to
-- inactive, pinned or delayed, a manual retry, a move to another type, a reuse save): it
-- starts over, with no runs, none done and none failed, so that it completes after k new
-- runs. Its targets and k (a fan_out('all') job's resolved `only`) stay; a late-joiners job
-- is in its type's late set again. Its runs were stopped already (runs_leave).
local function runs_reset(p, id, key, jtype, priority)
  redis.call('DEL', k_runs(p, id))
  redis.call('HSET', key, 'runs_done', '0', 'runs_failed', '0')
  if redis.call('HGET', key, 'late') == '1' then
    redis.call('ZADD', k_late(p, jtype), priority, zid(id))
  end
end

-- Move a job (`job` as load_job gives it, stored at `key`) to `state`, which is not
-- 'active' and not its current state ('inactive' means pinned for a job with workers of its
-- own): indexes, hash, history, and the events of the move.
-- A failed job moved back to inactive or delayed gets its attempts anew (a manual retry);
-- a fan-out job moved back to waiting starts over (runs_reset).
local function move_job(p, id, key, job, state, now)
  if state == 'inactive' then state = waiting(job.only) end
  if job.fan_out then
    runs_leave(p, id, job, 'moved to ' .. state, now)
    if state ~= 'complete' and state ~= 'failed' then
      runs_reset(p, id, key, job.type, job.priority)
    end
  end
  if job.state == 'active' then
    leave_active(p, id, job.type, job.group)  -- its lease ends: complete, fail are refused
  elseif STATES[job.state] then
    index_remove(p, id, job.type, job.state, job.group, job.prefer)
  end
  local fields = { 'state', state, 'updated_at', int(now) }
  if state == 'delayed' and job.promote_at == 0 then
    job.promote_at = now
    fields[#fields + 1] = 'promote_at'; fields[#fields + 1] = int(now)
  end
  redis.call('HSET', key, unpack(fields))
  if job.state == 'failed' and (state == 'inactive' or state == 'pinned' or state == 'delayed')
  then
    redis.call('HDEL', key, 'attempts')
  end
  index_add(p, id, job.type, state, job.priority, job.promote_at, job.ttl, now, job.group,
    job.prefer or false)
  history(p, id, { state = state, at = now, from = job.state })
  if state == 'complete' or state == 'failed' then
    deps_ended(p, id, key, release_unique_of(p, id), state, now)
  elseif job.state == 'complete' or job.state == 'failed' then
    -- Back from the dead by hand: it holds its key again, unless another job took it, and
    -- is awaited again by the jobs that depend on it (the sweep sees Node Kue end it).
    local u = redis.call('HMGET', key, 'unique', 'unique_mode', 'dependents')
    if u[1] and releases_at_end(u[2]) then
      redis.call('SET', k_unique(p, u[1]), tostring(id), 'NX')
    end
    if u[3] then redis.call('ZADD', k_awaited(p), 'NX', now, zid(id)) end
  end
  if job.state == 'delayed' and (state == 'inactive' or state == 'pinned') then
    publish(p, id, job.type, 'promotion', '')
  end
  if state == 'inactive' or state == 'pinned' then
    publish(p, id, job.type, 'enqueue', cjson.encode(job.type))
  elseif state == 'delayed' then
    redis.call('PUBLISH', k_promote(p), int(job.promote_at))
  end
end

-- Take a job out of the sets of its state before it changes state or type by hand (`job` as
-- load_job gives it); a running job's worker is told its attempt is over (see tell_worker).
local function leave_state(p, id, key, job, reason)
  if job.fan_out then runs_leave(p, id, job, reason, now_ms()) end
  if job.fan_out and job.state == 'active' then
    leave_active(p, id, job.type, job.group)  -- its runs were told (runs_leave)
  elseif job.state == 'active' then
    local h = redis.call('HMGET', key, 'workerId', 'lease')
    leave_active(p, id, job.type, job.group)
    tell_worker(p, h[1], id, h[2], reason)
  else
    index_remove(p, id, job.type, job.state, job.group, job.prefer)
  end
end

-- Records (see kue_core/records.py). A job's search words are those of its data (hash field
-- `words`, space separated) and of its tags (`tagwords`, a JSON list of space-separated words,
-- one entry per entry of `tags`, the JSON list of its tags).

-- A JSON list stored by us, or {} when absent or not a list (written by another client).
local function json_list(text)
  if not text then return {} end
  local ok, value = pcall(cjson.decode, text)
  if ok and type(value) == 'table' then return value end
  return {}
end

-- Add the space-separated words of `text` (nil for none) to the set `into`; returns it.
local function split_words(text, into)
  if text then
    for w in string.gmatch(text, '%S+') do into[w] = true end
  end
  return into
end

-- The set of every word a job is found by, from its `words` and `tagwords` fields.
local function job_words(words, tagwords)
  local set = split_words(words, {})
  for _, tw in ipairs(json_list(tagwords)) do split_words(tw, set) end
  return set
end

-- Index job `id` under the words of the set `new`, and no longer under those only in `old`;
-- <p>:words (the words in use, for prefix queries) follows.
local function index_words(p, id, old, new)
  local member = zid(id)
  for w in pairs(new) do
    if not old[w] then
      redis.call('ZADD', k_word(p, w), 0, member)
      redis.call('ZADD', k_words(p), 0, w)
    end
  end
  for w in pairs(old) do
    if not new[w] then
      local key = k_word(p, w)
      redis.call('ZREM', key, member)
      if redis.call('EXISTS', key) == 0 then redis.call('ZREM', k_words(p), w) end
    end
  end
end

-- The data of job `id` (stored at `key`) changed: index it under `words` (its data's words,
-- space separated; nil or '' for none) instead of those it had, keeping its tags' words.
local function reword(p, id, key, words)
  local h = redis.call('HMGET', key, 'words', 'tagwords')
  if (words or '') == (h[1] or '') then return end
  local tagwords = job_words(nil, h[2])
  local old, new = split_words(h[1], {}), split_words(words, {})
  for w in pairs(tagwords) do old[w] = true; new[w] = true end
  index_words(p, id, old, new)
  if words and words ~= '' then
    redis.call('HSET', key, 'words', words)
  else
    redis.call('HDEL', key, 'words')
  end
end

-- Tag job `id` with `tag` (at time `now`), or untag it when `now` is nil; <p>:tags (a zset,
-- tag -> jobs with it) counts.
local function index_tag(p, id, tag, now)
  if now then
    if redis.call('ZADD', k_tag(p, tag), 'NX', now, zid(id)) == 1 then
      redis.call('ZINCRBY', k_tags(p), 1, tag)
    end
  elseif redis.call('ZREM', k_tag(p, tag), zid(id)) == 1 then
    if tonumber(redis.call('ZINCRBY', k_tags(p), -1, tag)) <= 0 then
      redis.call('ZREM', k_tags(p), tag)
    end
  end
end

-- Raises unless `text` is a records object save_records takes (checked before a save writes
-- anything).
local function save_records_ok(text)
  local rec = cjson.decode(text)
  assert(type(rec) == 'table' and (rec.tags == nil or type(rec.tags) == 'table'))
  assert(rec.only == nil or (type(rec.only) == 'table' and #rec.only > 0))
  assert(rec.prefer == nil or (type(rec.prefer) == 'table' and #rec.prefer > 0
    and rec.only == nil and rec.fan_out == nil))
  assert(rec.fan_out == nil or rec.fan_out == 'all'
    or (type(rec.fan_out) == 'number' and rec.fan_out >= 1))
end

-- Write the records a new job is saved with: `rec` is the JSON object records.save_extras
-- makes: words (of its data), tags (tag, its words, ...), keys (searchKeys, JSON), track, kc
-- and kf (its retention policies). (Its group and only, save_job writes.)
local function save_records(p, id, rec, now)
  local fields = {}
  local function put(name, value) fields[#fields + 1] = name; fields[#fields + 1] = value end
  local all = split_words(rec.words, {})
  if rec.words then put('words', rec.words) end
  if rec.tags then
    local tags, tagwords = {}, {}
    for i = 1, #rec.tags, 2 do
      tags[#tags + 1] = rec.tags[i]
      tagwords[#tagwords + 1] = rec.tags[i + 1]
      split_words(rec.tags[i + 1], all)
      index_tag(p, id, rec.tags[i], now)
    end
    put('tags', cjson.encode(tags)); put('tagwords', cjson.encode(tagwords))
  end
  if rec.keys then put('searchKeys', rec.keys) end
  if rec.track then
    put('tracked', 'true')
    redis.call('ZADD', k_tracked(p), now, zid(id))
  end
  if rec.kc then put('keep_complete', rec.kc) end
  if rec.kf then put('keep_failed', rec.kf) end
  index_words(p, id, {}, all)
  if #fields > 0 then redis.call('HSET', k_job(p, id), unpack(fields)) end
end

-- Delete a job, its log and history, and every index entry it may have (the sets of every
-- state, and of `state` when it is not one of Kue's; its unique key, tags, words, tracking,
-- dependencies); publish remove. Jobs still blocked waiting for it follow their policy, as
-- for a job failed for good.
local function delete_job(p, id, jtype, state)
  local h = redis.call('HMGET', k_job(p, id), 'unique', 'unique_mode', 'words', 'tags',
    'tagwords', 'tracked', 'depends', 'dependents', 'group', 'fan_out', 'only', 'prefer')
  release_unique(p, id, h[1], h[2])
  if h[2] == 'reuse' and redis.call('HGET', k_unique_jobs(p), h[1]) == tostring(id) then
    redis.call('HDEL', k_unique_jobs(p), h[1])
  end
  if h[3] or h[5] then index_words(p, id, job_words(h[3], h[5]), {}) end
  for _, tag in ipairs(json_list(h[4])) do index_tag(p, id, tag, nil) end
  if h[6] then redis.call('ZREM', k_tracked(p), zid(id)) end
  if h[7] then  -- it no longer waits: the jobs it depends on forget it
    for _, d in ipairs(redis.call('ZRANGE', k_deps(p, id), 0, -1)) do
      redis.call('SREM', k_dependents(p, d), id)
    end
    redis.call('DEL', k_deps(p, id), k_results(p, id))
  end
  if h[8] then  -- the jobs depending on it keep its id, and the result it handed them
    -- Those still waiting for it (a bulk remove) take its removal as a failure: their policy.
    deps_failed(p, id, now_ms())
    redis.call('DEL', k_dependents(p, id))
    redis.call('ZREM', k_awaited(p), zid(id))
  end
  if h[10] then  -- a fan-out job: its runs stop, their leases and its places go
    stop_runs(p, id, 'removed', now_ms())
    runs_close(p, id, jtype, h[11])
    redis.call('DEL', k_runs(p, id))
  end
  for s in pairs(STATES) do  -- only a job with workers of its own can be pinned
    if s ~= 'pinned' or h[11] then index_remove(p, id, jtype, s, h[9], h[12]) end
  end
  if state and not STATES[state] then index_remove(p, id, jtype, state) end
  redis.call('ZREM', k_jobs(p), zid(id))
  redis.call('ZREM', k_leases(p), zid(id))
  redis.call('DEL', k_job(p, id), k_log(p, id), k_history(p, id))
  publish(p, id, jtype, 'remove', cjson.encode(jtype))
end

-- Retention (see kue_core/retention.py). A policy is "count,age" (ms; an empty part: no bound).
-- The finished job's own (hash field keep_complete or keep_failed) wins over the queue's
-- (<p>:retention, field complete or failed), which wins over RETAIN_COMPLETE / RETAIN_FAILED.
local function retention(p, state, own)
  local text = own
  if not text or text == 'remove' then text = redis.call('HGET', k_retention(p), state) end
  if not text then
    local d = RETAIN_FAILED
    if state == 'complete' then d = RETAIN_COMPLETE end
    return d[1], d[2]
  end
  local count, age = string.match(text, '^(%d*),(%d*)$')
  return tonumber(count), tonumber(age)
end

-- Remove at most `limit` finished jobs of `state` that the retention in force (`own`: the
-- policy of the job that just finished, or nil) no longer keeps: the oldest beyond its count,
-- then, when `ages` is true, those finished longer than its age ago. A member whose job left
-- that state without our scripts (a Node Kue client) is only dropped from the set. Returns
-- how many went. The finishing scripts look at ages for one job id in RETIRE_BATCH only (an
-- age is not a count: a little later is as good, and the sweep also looks); the count holds
-- after every finish.
local function retire(p, state, own, now, limit, ages)
  local count, age = retention(p, state, own)
  local key = k_finished(p, state)
  local doomed = {}
  if count then
    local over = redis.call('ZCARD', key) - count
    if over > 0 then doomed = redis.call('ZRANGE', key, 0, math.min(over, limit) - 1) end
  end
  if age and ages and #doomed < limit then
    local old = redis.call('ZRANGEBYSCORE', key, '-inf', int(now - age), 'LIMIT', #doomed,
      limit - #doomed)
    for _, m in ipairs(old) do doomed[#doomed + 1] = m end
  end
  for _, m in ipairs(doomed) do
    local id = zid_id(m)
    local h = redis.call('HMGET', k_job(p, id), 'type', 'state')
    if h[1] and h[2] == state then
      delete_job(p, id, h[1], state)
    else
      redis.call('ZREM', key, m)
    end
  end
  return #doomed
end

-- Record how a failed attempt ends, for a job already out of active. `f` holds type,
-- priority, attempts (made, this one included), worker, message (one line), text (kept on
-- the job), promote_at, group and only; `outcome` is 'failed' (for good), 'inactive' (retry
-- now; pinned for a job with workers of its own) or
-- 'delayed' (retry at f.promote_at). Writes state and error, indexes the job, appends
-- history, and publishes Kue's events: error, then failed, or failed attempt (+ enqueue).
local function record_failure(p, id, f, outcome, now)
  if outcome == 'inactive' then outcome = waiting(f.only) end
  local fields = {
    'state', outcome, 'error', f.text, 'failed_at', int(now), 'updated_at', int(now),
  }
  if outcome == 'delayed' then
    fields[#fields + 1] = 'promote_at'; fields[#fields + 1] = int(f.promote_at)
  end
  redis.call('HSET', k_job(p, id), unpack(fields))
  index_add(p, id, f.type, outcome, f.priority, f.promote_at, 0, now, f.group)
  history(p, id, { state = outcome, at = now, worker = f.worker, attempt = f.attempts,
    error = string.sub(f.text, 1, HISTORY_ERROR_LENGTH) })
  local msg = cjson.encode(f.message)
  publish(p, id, f.type, 'error', msg)
  if outcome == 'failed' then
    local u = release_unique_of(p, id)
    local own = u[3]
    count_outcome(p, f.type, 'failed', now, nil)
    publish(p, id, f.type, 'failed', msg)
    if u[4] then deps_failed(p, id, now) end
    if own == 'remove' then
      delete_job(p, id, f.type, 'failed')
    else
      retire(p, 'failed', own, now, RETIRE_BATCH, own or tonumber(id) % RETIRE_BATCH == 0)
    end
    return
  end
  publish(p, id, f.type, 'failed attempt', msg .. ',' .. f.attempts)
  if outcome ~= 'delayed' then
    publish(p, id, f.type, 'enqueue', cjson.encode(f.type))
  else
    redis.call('PUBLISH', k_promote(p), int(f.promote_at))  -- wake promoters due sooner
  end
end

-- The fields complete_job needs of a job (stored at `key`), in its order; fan_out (15) and
-- trail (16) last.
local function load_for_complete(key)
  return redis.call('HMGET', key, 'state', 'lease', 'type', 'priority', 'started_at',
    'removeOnComplete', 'workerId', 'attempts', 'max_attempts', 'unique', 'unique_mode',
    'keep_complete', 'dependents', 'group', 'fan_out', 'trail')
end

-- Complete active job `id` (stored at `key`; `h` as load_for_complete gives it) with
-- `result` (JSON text): out of active, its unique key released, counted (unless `tallied`:
-- the worker process that completed it counts it, see kue_core/tally.py), its dependents
-- told, then stored complete (or removed, with removeOnComplete) and retention applied.
-- Returns the job's duration (ms).
local function complete_job(p, id, key, h, result, now, tallied)
  local jtype = h[3]
  local duration = math.max(0, now - (tonumber(h[5]) or now))
  local attempt = next_attempt(h[8], h[9])  -- Kue counts a completion as an attempt
  leave_active(p, id, jtype, h[14])
  release_unique(p, id, h[10], h[11])
  if not tallied then
    redis.call('INCRBY', k_work_time(p), duration)
    count_outcome(p, jtype, 'complete', now, duration)
  end
  publish(p, id, jtype, 'complete', result)
  if h[13] then deps_complete(p, id, result, now) end
  if h[6] == 'true' then
    delete_job(p, id, jtype, nil)
  else
    local fields = { 'state', 'complete', 'result', result, 'duration', int(duration),
      'progress', '100', 'updated_at', int(now), 'attempts', int(attempt) }
    -- Its claim's trail, with no completion yet: the completion goes there too.
    local trail = h[16] and not string.find(h[16], ',.*,') and h[16]
    if trail then
      fields[13] = 'trail'
      fields[14] = trail .. ',' .. int(now) .. ',' .. int(duration) .. ',' .. int(attempt)
    end
    redis.call('HSET', key, unpack(fields))
    index_add(p, id, jtype, 'complete', tonumber(h[4]) or 0, 0, 0, now)
    if not trail then
      history(p, id, { state = 'complete', at = now, worker = h[7], attempt = attempt,
        duration = duration })
    end
    retire(p, 'complete', h[12], now, RETIRE_BATCH, h[12] or tonumber(id) % RETIRE_BATCH == 0)
  end
  return duration
end

-- Fan-out runs, continued: how they end, start, and how a job is saved to fan out.

-- The result of fan-out job `id` once its runs are done: {worker: result, ...} (JSON text)
-- of its completed runs.
local function runs_result(p, id)
  local runs, texts = runs_of(p, id)
  local parts = {}
  for w, run in pairs(runs) do
    if run.state == 'complete' then
      parts[#parts + 1] = cjson.encode(w) .. ':' .. run_result(texts[w])
    end
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- A worker completed the run of fan-out job `id` (at `key`) held under `token` with `result`:
-- the run is complete; once k runs are, the job completes with runs_result (complete_job),
-- else its place stays taken. Returns 'complete', or 'refused' when no running run has the
-- token (nothing written).
local function run_complete(p, id, key, token, result, now)
  local w, run = run_by_token(p, id, token)
  if not w then return 'refused' end
  run_end(p, id, w, run, 'complete', now, result)
  history(p, id, { state = 'active', at = now, worker = w, run = 'complete' })
  publish(p, id, redis.call('HGET', key, 'type'), 'run complete', cjson.encode(w))
  local done = redis.call('HINCRBY', key, 'runs_done', 1)
  local h = load_for_complete(key)
  if done < (tonumber(h[15]) or 0) then
    runs_offer(p, id)
    return 'complete'
  end
  local only = redis.call('HGET', key, 'only')
  stop_runs(p, id, 'the job completed', now)
  runs_close(p, id, h[3], only)
  complete_job(p, id, key, h, runs_result(p, id), now)
  return 'complete'
end

-- Fan-out job `id` (at `key`) fails for good: `message` (and `text`, kept as its error) say
-- why; its other running runs stop; no retry. `f` as record_failure takes it, without the
-- message, text and attempts.
local function runs_fail(p, id, key, message, text, now)
  local h = redis.call('HMGET', key, 'type', 'priority', 'workerId', 'group', 'only')
  stop_runs(p, id, message, now)
  runs_close(p, id, h[1], h[5])
  leave_active(p, id, h[1], h[4])
  record_failure(p, id, {
    type = h[1], priority = tonumber(h[2]) or 0, attempts = count_attempt(key), worker = h[3],
    message = message, text = text, promote_at = 0, group = h[4], only = h[5],
  }, 'failed', now)
end

-- A worker's run of fan-out job `id` (at `key`) under `token` failed with `message` (`text`
-- kept): the run is failed; past max_failed_runs failed runs the job fails for good (see
-- runs_fail), else the place opens again. Returns 'failed', 'inactive' (the place reopened)
-- or 'refused' when no running run has the token (nothing written).
local function run_fail(p, id, key, token, message, text, now)
  local w, run = run_by_token(p, id, token)
  if not w then return 'refused' end
  run.error = message
  run_end(p, id, w, run, 'failed', now)
  history(p, id, { state = 'active', at = now, worker = w, run = 'failed',
    error = string.sub(text, 1, HISTORY_ERROR_LENGTH) })
  publish(p, id, redis.call('HGET', key, 'type'), 'run failed',
    cjson.encode(w) .. ',' .. cjson.encode(message))
  local failed = redis.call('HINCRBY', key, 'runs_failed', 1)
  if failed > (tonumber(redis.call('HGET', key, 'max_failed_runs')) or 0) then
    runs_fail(p, id, key, 'run on ' .. w .. ' failed: ' .. message,
      'run on ' .. w .. ' failed: ' .. text, now)
    return 'failed'
  end
  runs_offer(p, id)
  return 'inactive'
end

-- The run of worker `w` of fan-out job `id` (at `key`) is lost without its worker's report:
-- `stalled` (its lease expired: the job's stalls go up, and past `limit_stalls` it fails for
-- good) or given back (release). Returns 'failed' when the job failed, else 'reopened';
-- nil when that run is not running (nothing written).
local function run_lost(p, id, key, w, token, stalled, limit_stalls, now)
  local run = run_of(p, id, w)
  if not (run and run.state == 'running') then return nil end
  if token and run.token ~= token then return nil end
  run_end(p, id, w, run, 'lost', now)
  history(p, id, { state = 'active', at = now, worker = w, run = 'lost', stalled = stalled,
    released = not stalled or nil })
  publish(p, id, redis.call('HGET', key, 'type'), 'run lost', cjson.encode(w))
  if stalled then
    local stalls = redis.call('HINCRBY', key, 'stalls', 1)
    if stalls > limit_stalls then
      local reason = 'stalled ' .. stalls .. ' times: the run on ' .. w .. ' stopped renewing '
        .. 'its lease (its worker died, hung, or lost Redis)'
      runs_fail(p, id, key, reason, reason, now)
      return 'failed'
    end
  end
  runs_offer(p, id)
  return 'reopened'
end

-- A finishing script's claim for its own worker deletes the type's wake-up tokens when it
-- finds nothing it may take (see claim), the one runs_offer pushed for a place it opened in
-- the same call too, though other workers may take that place: one goes back while places
-- of `jtype` are open, so that an idle worker is woken for them.
local function runs_rewake(p, jtype)
  local tokens = k_tokens(p, jtype)
  if redis.call('EXISTS', k_open(p, jtype)) == 1 and redis.call('EXISTS', tokens) == 0 then
    redis.call('LPUSH', tokens, 1)
  end
end

-- The live workers that serve `jtype`: registered in <p>:workers, heartbeat within their
-- lease, `types` of their info has it, not stopping; among `only` (a list) when given.
-- Sorted, for a stable order.
local function live_targets(p, jtype, only, now)
  local allowed = nil
  if only then
    allowed = {}
    for _, w in ipairs(only) do allowed[w] = true end
  end
  local found = {}
  for _, w in ipairs(redis.call('ZRANGE', k_workers(p), 0, -1)) do
    if not allowed or allowed[w] then
      local h = redis.call('HMGET', k_worker(p, w), 'heartbeat', 'lease_ms', 'info')
      if h[3] and (tonumber(h[1]) or 0) + (tonumber(h[2]) or 0) >= now then
        local ok, info = pcall(cjson.decode, h[3])
        if ok and type(info) == 'table' and type(info.types) == 'table'
          and info.types[jtype] and info.stopping ~= true then
          found[#found + 1] = w
        end
      end
    end
  end
  table.sort(found)
  return found
end

-- Note that `jtype` has fan-out jobs (and, with `late`, late joiners): its claims look at
-- open places (and late jobs) from now on.
local function mark_fanout(p, jtype, late)
  mark_rule(p, jtype, 'fanout')
  if late then mark_rule(p, jtype, 'late') end
end

-- Whether ARGV[b+1..b+SAVE_WIDTH] is a well-formed job for save_job.
local function save_row_ok(b)
  return ARGV[b + 1] ~= '' and tonumber(ARGV[b + 3]) and tonumber(ARGV[b + 4])
    and tonumber(ARGV[b + 5]) and tonumber(ARGV[b + 7]) and tonumber(ARGV[b + 9])
    and (ARGV[b + 10] == '' or pcall(save_records_ok, ARGV[b + 10]))
end

-- Store a new job from ARGV[b+1..b+SAVE_WIDTH] (see save.lua), with `extra` hash fields
-- (a flat list, or nil); index it, publish its events; return its id. With `blocked`, it is
-- saved in state blocked (waiting for dependencies; promote_at is its due time, or 0 when it
-- has none or a delay, which counts from when it is unblocked).
local function save_job(p, ids_key, b, now, extra, blocked)
  local jtype, data, priority = ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3])
  local delay, ttl, due_at = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 7]), tonumber(ARGV[b + 9])
  if due_at > 0 then delay = math.max(0, due_at - now) end
  local id = redis.call('INCR', ids_key)
  while redis.call('EXISTS', k_job(p, id)) == 1 do
    id = redis.call('INCR', ids_key)
  end
  local rec = ARGV[b + 10] ~= '' and cjson.decode(ARGV[b + 10])
  local only = rec and rec.only and cjson.encode(rec.only)
  local fan = rec and rec.fan_out
  if fan == 'all' then  -- its targets: the live workers serving the type (among `only`)
    local targets = live_targets(p, jtype, rec and rec.only, now)
    fan = #targets
    only = fan > 0 and cjson.encode(targets) or nil
  end
  local state = waiting(only)
  if delay > 0 then state = 'delayed' end
  local promote_at = now + delay
  if blocked then
    state = 'blocked'
    promote_at = 0
    if due_at > now then promote_at = due_at end
  end
  if fan == 0 then state = 'complete' end  -- fan_out('all') and no worker alive: done
  local fields = {
    'type', jtype, 'data', data, 'priority', int(priority), 'state', state,
    'created_at', int(now), 'promote_at', int(promote_at), 'updated_at', int(now),
    'max_attempts', ARGV[b + 5],
  }
  if delay > 0 then
    fields[#fields + 1] = 'delay'; fields[#fields + 1] = int(delay)
  end
  if ARGV[b + 6] ~= '' then
    fields[#fields + 1] = 'backoff'; fields[#fields + 1] = ARGV[b + 6]
  end
  if ttl > 0 then
    fields[#fields + 1] = 'ttl'; fields[#fields + 1] = int(ttl)
  end
  if ARGV[b + 8] == '1' then
    fields[#fields + 1] = 'removeOnComplete'; fields[#fields + 1] = 'true'
  end
  if extra then
    for _, v in ipairs(extra) do fields[#fields + 1] = v end
  end
  if only then
    fields[#fields + 1] = 'only'; fields[#fields + 1] = only
  end
  local group = rec and rec.group
  if group then
    fields[#fields + 1] = 'group'; fields[#fields + 1] = group
    mark_grouped(p, jtype)
  end
  if rec and type(rec.trace) == 'string' then  -- the producer's trace context (tracing.py)
    fields[#fields + 1] = 'trace'; fields[#fields + 1] = rec.trace
  end
  local prefer = rec and rec.prefer and cjson.encode(rec.prefer) or false
  if prefer then
    fields[#fields + 1] = 'prefer'; fields[#fields + 1] = prefer
    mark_rule(p, jtype, 'prefer')  -- moves back to inactive read `prefer` (index_add)
  end
  if fan then
    local function put(name, value) fields[#fields + 1] = name; fields[#fields + 1] = value end
    put('fan_out', int(fan)); put('max_failed_runs', int(rec.mfr or 0))
    put('runs_done', '0'); put('runs_failed', '0')
    if rec.at_once then put('at_once', int(rec.at_once)) end
    if rec.late then put('late', '1') end
    if fan == 0 then put('result', '{}'); put('progress', '100') end
    mark_fanout(p, jtype, rec.late)
  end
  redis.call('HSET', k_job(p, id), unpack(fields))
  redis.call('ZADD', k_jobs(p), priority, zid(id))
  index_add(p, id, jtype, state, priority, promote_at, ttl, now, group, prefer)
  redis.call('SADD', k_types(p), jtype)
  if rec then save_records(p, id, rec, now) end
  if state ~= 'inactive' and state ~= 'delayed' then  -- else implied (see saved_entry)
    redis.call('RPUSH', k_history(p, id), cjson.encode({ state = state, at = now }))
  end
  if fan and rec.late and fan > 0 then redis.call('ZADD', k_late(p, jtype), priority, zid(id)) end
  if state == 'complete' then
    count_outcome(p, jtype, 'complete', now, 0)
    publish(p, id, jtype, 'complete', '{}')
  elseif state == 'inactive' or state == 'pinned' then
    publish(p, id, jtype, 'enqueue', cjson.encode(jtype))
  elseif state == 'delayed' then
    redis.call('PUBLISH', k_promote(p), int(promote_at))  -- wake promoters due sooner
  end
  return id
end

-- Whether a unique key, mode and key ttl (ms, a number) are well-formed for save_unique.
local function unique_ok(key, mode, key_ttl)
  return key_ttl ~= nil and key ~= '' and (mode == 'until_done' or mode == 'debounce'
    or mode == 'reuse' or (mode == 'throttle' and key_ttl > 0))
end

-- Store a new job from ARGV[b+1..b+SAVE_WIDTH] holding the unique `key` (see
-- kue_core/unique.py for the modes), unless a job holds it already; `extra` as save_job's.
-- Returns {id, outcome, state}: outcome 'saved', 'deduplicated' (the holder's id; nothing
-- written), 'debounced' (the delayed or waiting holder got the new data and due time) or
-- 'reused' (kue-unique's mode: the holder got the new data, and waits again if it had
-- finished); state: the job's state now (false for a throttling holder that is gone).
-- With reset_runs (`reset` in the records object), a save that lands on an active fan-out
-- holder (deduplicated, or reused) clears its failed runs (runs_retry); a reuse that makes a
-- finished fan-out holder wait again starts it over (runs_reset), with or without it.
local function save_unique(p, ids_key, b, key, mode, key_ttl, now, extra)
  local k = k_unique(p, key)
  local holder
  if mode == 'reuse' then
    holder = redis.call('HGET', k_unique_jobs(p), key)
  else
    holder = redis.call('GET', k)
  end
  local job = holder and load_job(k_job(p, holder))

  local function new_job()
    local fields = { 'unique', key, 'unique_mode', mode }
    for _, v in ipairs(extra or {}) do fields[#fields + 1] = v end
    local id = save_job(p, ids_key, b, now, fields)
    if mode == 'reuse' then
      redis.call('HSET', k_unique_jobs(p), key, id)
    elseif key_ttl > 0 then
      redis.call('SET', k, id, 'PX', key_ttl)
    else
      redis.call('SET', k, id)
    end
    return { id, 'saved', redis.call('HGET', k_job(p, id), 'state') }
  end

  local function held(outcome, state)
    -- reset_runs (the records' `reset`): an active fan-out holder's failed runs go.
    if state == 'active' and job.fan_out and ARGV[b + 10] ~= ''
      and cjson.decode(ARGV[b + 10]).reset then
      runs_retry(p, holder, k_job(p, holder), now)
    end
    publish(p, holder, job.type, 'deduplicated', cjson.encode(key))
    return { tonumber(holder), outcome, state }
  end

  if mode == 'throttle' and holder then  -- blocks for its ttl, whatever became of the job
    if not job then return { tonumber(holder), 'deduplicated', false } end
    return held('deduplicated', job.state)
  end
  if not job then return new_job() end  -- a key left by a job deleted without our scripts
  if mode == 'until_done' then
    if job.state == 'complete' or job.state == 'failed' then return new_job() end
    return held('deduplicated', job.state)
  end

  -- debounce and reuse change the holder: new data, and the new job's delay from now.
  local jkey = k_job(p, holder)
  local delay, due_at = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 9])
  if due_at > 0 then delay = math.max(0, due_at - now) end
  if mode == 'debounce' and job.state ~= 'delayed' and job.state ~= waiting(job.only) then
    return new_job()  -- it has started: a duplicate is new work
  end
  redis.call('HSET', jkey, 'data', ARGV[b + 2], 'updated_at', int(now))
  local words = nil  -- the duplicate's data words replace the holder's
  if ARGV[b + 10] ~= '' then words = cjson.decode(ARGV[b + 10]).words end
  reword(p, holder, jkey, words)
  if job.state == 'active' then
    history(p, holder, { state = 'active', at = now, edited = true, unique = key })
    return held('reused', 'active')  -- reuse of a running job: it has the new data next time
  end
  local state = waiting(job.only)
  if delay > 0 then state = 'delayed' end
  if STATES[job.state] then
    index_remove(p, holder, job.type, job.state, job.group, job.prefer)
  end
  if job.fan_out then runs_reset(p, holder, jkey, job.type, job.priority) end  -- starts over
  keep_saved(p, holder)
  local fields = { 'state', state, 'promote_at', int(now + delay) }
  if delay > 0 then
    fields[#fields + 1] = 'delay'; fields[#fields + 1] = int(delay)
  end
  redis.call('HSET', jkey, unpack(fields))
  if job.state == 'failed' then redis.call('HDEL', jkey, 'attempts') end
  index_add(p, holder, job.type, state, job.priority, now + delay, 0, now, job.group,
    job.prefer or false)
  history(p, holder, { state = state, at = now, from = job.state, unique = key })
  if state == 'delayed' then
    redis.call('PUBLISH', k_promote(p), int(now + delay))
  elseif job.state ~= state then
    publish(p, holder, job.type, 'enqueue', cjson.encode(job.type))
  end
  if mode == 'debounce' then return held('debounced', state) end
  return held('reused', state)
end

-- Limits (see kue_core/limits.py). The starts of a rate-limited type (or group) are logged in
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

-- The score and member of the first of zset `key`, or nil.
local function first_of(key)
  local top = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if not top[1] then return nil end
  return tonumber(top[2]), top[1]
end

-- Whether `worker` should leave its place in fan-out job `id` to others: its run of the job
-- (`run`, or nil) failed, and it would likely fail there again, while another live worker
-- serving `jtype` that the job may run on (its `only`, if any) may start a run of it (see
-- live_targets, run_eligible).
local function leave_place(p, jtype, id, worker, run)
  if not (run and run.state == 'failed') then return false end
  local only = pin_list(redis.call('HGET', k_job(p, id), 'only'))
  local runs = runs_of(p, id)
  for _, w in ipairs(live_targets(p, jtype, #only > 0 and only or nil, now_ms())) do
    if w ~= worker and run_eligible(runs, w) then return true end
  end
  return false
end

-- The best member of zset `key` of fan-out places among its first OPEN_SCAN that `worker`
-- should not leave to others (see leave_place), and its score; or nil. `open`: <p>:open:<type>,
-- where it takes only jobs it may start a run of (see run_eligible).
local function scan_places(p, jtype, worker, key, open)
  local top = redis.call('ZRANGE', key, 0, OPEN_SCAN - 1, 'WITHSCORES')
  for i = 1, #top, 2 do
    local id = zid_id(top[i])
    local run = run_of(p, id, worker)
    if (not open or not run or run.state == 'lost' or run.state == 'failed')
      and not leave_place(p, jtype, id, worker, run) then
      return top[i], tonumber(top[i + 1])
    end
  end
  return nil
end

-- The best job of <p>:open:<type> for `worker`, and its score; or nil (see scan_places).
local function open_top(p, jtype, worker)
  return scan_places(p, jtype, worker, k_open(p, jtype), true)
end

-- The best job of `worker`'s places of `jtype`, and its score; or nil. In a type with fan-out
-- jobs, through scan_places: a pinned fan-out job whose run failed on it waits for its other
-- workers.
local function places_top(p, jtype, worker, r)
  local key = k_places(p, jtype, worker)
  if r.fanout then return scan_places(p, jtype, worker, key, false) end
  local score, member = first_of(key)
  return member, score
end

-- `worker` claims `jtype`: it joins each unfinished late-joiners job of the type among the
-- first LATE_SCAN that it is not a target of (added to `only`, fan_out + 1, a place of its
-- own when the job waits pinned or runs).
local function late_join(p, jtype, worker, now)
  for _, member in ipairs(redis.call('ZRANGE', k_late(p, jtype), 0, LATE_SCAN - 1)) do
    local id = zid_id(member)
    local key = k_job(p, id)
    local h = redis.call('HMGET', key, 'state', 'only', 'fan_out', 'priority', 'type')
    if h[1] == 'complete' or h[1] == 'failed' or not h[1] or h[5] ~= jtype then
      redis.call('ZREM', k_late(p, jtype), member)  -- ended without our scripts
    else
      local only = pin_list(h[2])
      local known = false
      for _, w in ipairs(only) do
        if w == worker then known = true end
      end
      if not known then
        only[#only + 1] = worker
        redis.call('HSET', key, 'only', cjson.encode(only),
          'fan_out', int((tonumber(h[3]) or 0) + 1))
        history(p, id, { state = h[1], at = now, joined = worker })
        if h[1] == 'pinned' then
          redis.call('ZADD', k_places(p, jtype, worker), tonumber(h[4]) or 0, member)
        elseif h[1] == 'active' then
          runs_offer(p, id)
        end
      end
    end
  end
end

-- Start the run of `worker` of fan-out job `id` under `token` (the job's new lease counter):
-- its record (tries counted), its lease, a history entry and the event run start [worker].
local function run_begin(p, id, jtype, worker, token, lease_ms, now)
  local before = run_of(p, id, worker)
  local tries = 1
  if before then tries = (tonumber(before.tries) or 0) + 1 end
  run_put(p, id, worker, { state = 'running', token = token, started_at = now, tries = tries })
  redis.call('ZADD', k_run_leases(p), now + lease_ms, id .. '@' .. worker)
  history(p, id, { state = 'active', at = now, worker = worker, run = true })
  publish(p, id, jtype, 'run start', cjson.encode(worker))
end

-- Put `changes` (field -> value) of a claimed job into `out` (its hash as claim_member read
-- it; `at`: field -> index there, appended when absent); returns them as HSET arguments
-- (all but `run`, which goes in the reply only).
local function claim_changes(out, at, changes)
  local fields = {}
  for field, value in pairs(changes) do
    if field ~= 'run' then
      fields[#fields + 1] = field; fields[#fields + 1] = value
    end
    if at[field] then
      out[at[field]] = value
    else
      out[#out + 1] = field; out[#out + 1] = value
    end
  end
  return fields
end

-- `worker` starts a further run of active fan-out job `id` (`out`, `at`: its hash read by
-- claim_member): the reply as claim_member gives it, or nil when it may not (it holds or
-- completed a run of it, or no place is open).
local function run_claim(p, jtype, id, out, at, worker, lease_ms, now, r)
  local runs = runs_of(p, id)
  local running = 0
  for _, run in pairs(runs) do
    if run.state == 'running' then running = running + 1 end
  end
  local k = tonumber(out[at.fan_out]) or 0
  local done = tonumber(out[at.runs_done or 0]) or 0
  local open = math.min(k - done, tonumber(out[at.at_once or 0]) or k) - running
  if open <= 0 or not run_eligible(runs, worker) then
    runs_offer(p, id)  -- it should not have been offered to this worker
    return nil
  end
  local waiting_since = tonumber(out[at.updated_at or 0]) or now
  local token = int((tonumber(out[at.lease or 0]) or 0) + 1)
  local changes = { updated_at = int(now), workerId = worker, lease = token, run = worker }
  local fields = claim_changes(out, at, changes)
  redis.call('HSET', k_job(p, id), unpack(fields))
  run_begin(p, id, jtype, worker, token, lease_ms, now)
  runs_offer(p, id)
  if r then count_start(p, jtype, r, nil, id .. ':' .. token, now) end
  out[#out + 1] = 'waited'; out[#out + 1] = int(math.max(0, now - waiting_since))
  table.insert(out, 1, id)
  return out
end

-- Claim `member` of the type's inactive set (or, with `pinned`, of `worker`'s places; with
-- `open`, of <p>:open:<type>) for `worker` if it is a job of `jtype` waiting there: move it to
-- active under a new lease and return {id, field, value, ...} of its hash; nil for a stale
-- member (left by an interrupted client, or written by hand: it is taken out of the sets it
-- should not be in). `popped`: it was popped off the type's set already; `r`: the type's
-- rules (or false). The lease's fencing token is the job's `lease` counter, bumped on every
-- claim; complete, fail and renew are refused when it no longer matches.
-- A fan-out job starts a run instead (see run_begin): its first from where it waits, the
-- next ones while it is active (run_claim); its token is the run's, `run` in the reply the
-- worker id, and its lease is the run's (<p>:run-leases), not in <p>:leases.
local function claim_member(p, jtype, member, worker, lease_ms, now, popped, r, pinned, open)
  local id = zid_id(member)
  local jkey = k_job(p, id)
  -- The whole hash, read once: the reply is this hash with the claim's changes applied.
  local out = redis.call('HGETALL', jkey)
  local at = {}  -- field -> index of its value in `out`
  for i = 1, #out, 2 do at[out[i]] = i + 1 end
  local state = at.state and out[at.state]
  local prefer = at.prefer and out[at.prefer]  -- a preferred job waits inactive, in places too
  local from = (pinned and not prefer) and 'pinned' or 'inactive'
  if pinned then
    redis.call('ZREM', k_places(p, jtype, worker), member)
  end
  if (not pinned or prefer) and not popped and not open then
    redis.call('ZREM', k_type_state(p, jtype, 'inactive'), member)
  end
  if at.fan_out and state == 'active' and out[at.type] == jtype and (pinned or open) then
    return run_claim(p, jtype, id, out, at, worker, lease_ms, now, r)
  end
  if open then
    redis.call('ZREM', k_open(p, jtype), member)  -- not an active fan-out job of the type
    return nil
  end
  if state ~= from or out[at.type or 0] ~= jtype then
    -- Not a job of this type waiting here: it is out of this set now. Unless the job waits
    -- under another type (and belongs in the global set of its state), take it out of that.
    if state ~= from and not pinned then redis.call('ZREM', k_state(p, 'inactive'), member) end
    return nil
  end
  local priority = tonumber(out[at.priority or 0]) or 0
  local ttl = tonumber(out[at.ttl or 0]) or 0
  local attempts = tonumber(out[at.attempts or 0]) or 0
  local waiting_since = tonumber(out[at.updated_at or 0]) or now
  local group = at.group and out[at.group]
  local lease = int((tonumber(out[at.lease or 0]) or 0) + 1)
  local changes = { state = 'active', started_at = int(now), updated_at = int(now),
    workerId = worker, lease = lease }
  if at.fan_out then
    changes.run = worker
  else
    if at.trail then history(p, id, nil) end  -- left by a claim the job's history missed
    changes.trail = int(now) .. ',' .. int(attempts + 1)  -- its entry (see trail_entries)
  end
  local fields = claim_changes(out, at, changes)
  if from == 'pinned' then
    index_remove(p, id, jtype, 'pinned')  -- before the hash changes: it reads `only`
  else
    redis.call('ZREM', k_state(p, 'inactive'), member)
    if group then redis.call('ZREM', k_group(p, jtype, group), member) end
    redis.call('RPOP', k_tokens(p, jtype))
    if prefer then  -- out of every preferred worker's places, whoever claims it
      for _, w in ipairs(pin_list(prefer)) do redis.call('ZREM', k_places(p, jtype, w), member) end
    end
  end
  redis.call('HSET', jkey, unpack(fields))
  index_add(p, id, jtype, 'active', priority, 0, ttl, now, group)
  if r then count_start(p, jtype, r, group, id .. ':' .. lease, now) end
  if at.fan_out then
    publish(p, id, jtype, 'start', cjson.encode(jtype))
    run_begin(p, id, jtype, worker, lease, lease_ms, now)
    runs_offer(p, id)
  else
    redis.call('ZADD', k_leases(p), now + lease_ms, member)
    publish(p, id, jtype, 'start', cjson.encode(jtype))
  end
  -- Not stored: how long it waited, from its last change while waiting (for statistics).
  out[#out + 1] = 'waited'; out[#out + 1] = int(math.max(0, now - waiting_since))
  table.insert(out, 1, id)
  return out
end

-- Give group (or LANE) `g` the last turn of the rotation `rot`.
local function last_turn(rot, g)
  local last = redis.call('ZRANGE', rot, -1, -1, 'WITHSCORES')
  redis.call('ZADD', rot, (tonumber(last[2]) or 0) + 1, g)
end

-- The best job of no group among the next LANE_SCAN of the type's set (`kue_set`), or nil.
local function lane_top(p, kue_set)
  for _, member in ipairs(redis.call('ZRANGE', kue_set, 0, LANE_SCAN - 1)) do
    if not redis.call('HGET', k_job(p, zid_id(member)), 'group') then return member end
  end
  return nil
end

-- Claim for a type with groups: the groups with jobs waiting take turns (the least recently
-- served first), skipping those at their group limits; the jobs in no group take their turn
-- as LANE (see lane_top). Returns the job as claim_member, or {'limited', ms} when none of
-- the groups looked at (GROUP_SCAN of them) may start one.
local function claim_grouped(p, jtype, r, worker, lease_ms, now)
  local rot, wait = k_groups(p, jtype), nil
  local kue_set = k_type_state(p, jtype, 'inactive')
  for _, g in ipairs(redis.call('ZRANGE', rot, 0, GROUP_SCAN - 1)) do
    local set = k_group(p, jtype, g)
    local w = nil
    if g ~= LANE then w = group_wait(p, jtype, g, r, now) end
    if w then
      wait = math.min(wait or w, w)
    else
      for _ = 1, 10 do
        local top
        if g == LANE then
          top = lane_top(p, kue_set)
        else
          top = redis.call('ZRANGE', set, 0, 0)[1]
        end
        if not top then break end
        local out = claim_member(p, jtype, top, worker, lease_ms, now, false, r)
        if out then
          if g == LANE or redis.call('EXISTS', set) == 1 then
            last_turn(rot, g)
          else
            redis.call('ZREM', rot, g)  -- nothing left waiting in it
          end
          return out
        end
        if g ~= LANE then redis.call('ZREM', set, top) end
      end
      if g == LANE then
        last_turn(rot, g)  -- none near the head of the type's queue: the turn passes
      elseif redis.call('EXISTS', set) == 0 then
        redis.call('ZREM', rot, g)
      end
    end
  end
  return { 'limited', int(wait or LIMIT_RECHECK_MS) }
end

-- Where the best job for `worker` of `jtype` is when it is not in the type's set `key` (any
-- worker's): 'pinned' and its member (the best of the worker's places: a job pinned to it, or
-- a fan-out job's place), or 'open' and its member (a fan-out job's place open to any worker,
-- see open_top); nil when the type's set comes first or nothing waits. By priority; at equal
-- priority pinned, then open, then the type's set. `r`: the type's rules.
local function pick(p, jtype, worker, key, r)
  local ms, mine, os, open
  if r.pins then mine, ms = places_top(p, jtype, worker, r) end
  if r.fanout then open, os = open_top(p, jtype, worker) end
  if not mine and not open then return nil end
  local ps = first_of(key)
  if mine and (not os or ms <= os) and (not ps or ms <= ps) then return 'pinned', mine end
  if open and (not ps or os <= ps) then return 'open', open end
  return nil
end

-- Claim the best inactive job of `jtype` for `worker` (lowest score, FIFO within a score; a
-- job pinned to `worker` first at equal scores, then a fan-out job's open place) under its
-- rules (paused, limits, groups, pins, fan-out): the job as claim_member gives it, or false
-- when none is waiting ({'pins'} for a type with pinned jobs: the worker also waits on its
-- wake list), or {'paused'} when the type is paused, or {'limited', ms} when its limits hold
-- it back for ms (less if a place frees: <p>:<type>:limited is pushed then). A claim of a
-- type with late-joiners jobs first joins them (see late_join).
local function claim(p, jtype, worker, lease_ms, now)
  local key = k_type_state(p, jtype, 'inactive')
  local r = rule_of(p, jtype)
  if r then
    if r.paused then return { 'paused' } end
    if r.late then late_join(p, jtype, worker, now) end
    local src, member = pick(p, jtype, worker, key, r)
    if not src and redis.call('EXISTS', key) == 0 then
      redis.call('DEL', k_tokens(p, jtype))  -- nothing is waiting: every token left is stale
      return r.pins and { 'pins' } or false
    end
    local wait = type_wait(p, jtype, r, now)
    if wait then return { 'limited', int(wait) } end
    for _ = 1, 10 do
      if not src then break end
      local out = claim_member(p, jtype, member, worker, lease_ms, now, false, r,
        src == 'pinned', src == 'open')
      if out then return out end
      src, member = pick(p, jtype, worker, key, r)  -- that one was stale
    end
    if r.groups then return claim_grouped(p, jtype, r, worker, lease_ms, now) end
  end
  for _ = 1, 100 do
    local top = redis.call('ZPOPMIN', key)
    if #top == 0 then
      redis.call('DEL', k_tokens(p, jtype))  -- nothing is waiting: every token left is stale
      return r and r.pins and { 'pins' } or false
    end
    local out = claim_member(p, jtype, top[1], worker, lease_ms, now, true, r)
    if out then return out end
  end
  return false  -- only stale members so far; the caller asks again
end

-- Claim for `worker` the first job of the types ARGV[first..#ARGV], tried in that order:
-- the job as claim gives it; with one type, what claim gives; with several and no job,
-- {'wait', s1, s2, ...}: per type '' (none waiting), 'pins' (none, and it has pinned jobs),
-- 'paused', or the ms its limits hold it.
local function claim_first(p, first, worker, lease_ms, now)
  if first == #ARGV then return claim(p, ARGV[first], worker, lease_ms, now) end
  local waits = { 'wait' }
  for i = first, #ARGV do
    local got = claim(p, ARGV[i], worker, lease_ms, now)
    if not got then
      waits[#waits + 1] = ''
    elseif got[1] == 'paused' or got[1] == 'pins' then
      waits[#waits + 1] = got[1]
    elseif got[1] == 'limited' then
      waits[#waits + 1] = got[2]
    else
      return got
    end
  end
  return waits
end

-- The claim a finishing script makes for its worker, from ARGV[first..] (worker id, lease
-- ms, then the types to claim from in order, the finished job's `jtype` when none; '' for the
-- worker: claim nothing): what claim_first gives, or an empty table. `fanned`: the finished
-- job fans out (see runs_rewake).
local function claim_after(p, jtype, first, now, fanned)
  local worker, lease_ms = ARGV[first], tonumber(ARGV[first + 1])
  if not worker or worker == '' or not lease_ms then return {} end
  local out
  if #ARGV < first + 2 then
    out = claim(p, jtype, worker, lease_ms, now) or {}
  else
    out = claim_first(p, first + 2, worker, lease_ms, now) or {}
  end
  if fanned then runs_rewake(p, jtype) end
  return out
end

-- Redis Cluster: while this queue's slot migrates to another node, its keys move a batch at a
-- time, and a script that met an already-moved key half-way would stop with its first writes
-- done. So every script first reads a key that never exists: on a migrating slot Redis
-- refuses that read (the key may have moved), the script stops having changed nothing, and
-- the client sends it again once the slot has moved. Anywhere else this is one cheap EXISTS.
redis.call('EXISTS', k_fence(ARGV[1]))
-- What one call learns, for that call only.
rules_read = {}

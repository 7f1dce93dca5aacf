-- Uses     lib/base, lib/keys, lib/members, lib/type_rules, lib/pins, lib/indexes, lib/events,
--          lib/runs, lib/finishing, lib/limits, lib/places
-- Put `changes` (field, value, field, value...) of a claimed job into `out` (its hash as
-- claim_member read it; `at`: field -> index there, appended when absent); returns them as
-- HSET arguments (all but `run`, which goes in the reply only).
local function claim_changes(out, at, changes)
  local fields = {}
  for i = 1, #changes, 2 do
    local field, value = changes[i], changes[i + 1]
    if field ~= 'run' then
      fields[#fields + 1] = field; fields[#fields + 1] = value
    end
    local j = at[field]
    if j then
      out[j] = value
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
  local changes = { 'updated_at', int(now), 'workerId', worker, 'lease', token, 'run', worker }
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
-- `id`, `out` and `at`: the job's id, its hash as HGETALL gave it and field -> index of its
-- value there, when the caller read them (claim_plain); read here when nil.
local function claim_member(p, jtype, member, worker, lease_ms, now, popped, r, pinned, open,
                            id, out, at)
  local jkey
  if out then
    jkey = k_job(p, id)
  else
    id = zid_id(member)
    jkey = k_job(p, id)
    -- The whole hash, read once: the reply is this hash with the claim's changes applied.
    out = redis.call('HGETALL', jkey)
    at = {}  -- field -> index of its value in `out`
    for i = 1, #out, 2 do at[out[i]] = i + 1 end
  end
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
  local changes = { 'state', 'active', 'started_at', int(now), 'updated_at', int(now),
    'workerId', worker, 'lease', lease }
  if at.fan_out then
    changes[11] = 'run'; changes[12] = worker
  else
    if at.trail then history(p, id, nil) end  -- left by a claim the job's history missed
    changes[11] = 'trail'  -- its entry (see trail_entries)
    changes[12] = int(now) .. ',' .. int(attempts + 1)
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
    redis.call('ZADD', k_leases(p), int(now + lease_ms), member)
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

-- The fields of a job a claim of a type with no rules looks at, by their place in
-- plain_take's table of where each is: a job with any of the last four is no plain job.
local PLAIN_FIELDS = { state = 1, type = 2, priority = 3, ttl = 4, attempts = 5,
  updated_at = 6, lease = 7, started_at = 8, workerId = 9,
  group = 10, prefer = 10, fan_out = 10, trail = 10 }

-- Claim member `member` of <p>:jobs:<jtype>:inactive, popped already, as claim_member does
-- (`out`: its hash, as HGETALL gave it).
local function claim_read(p, jtype, member, worker, lease_ms, now, id, out)
  local named = {}  -- field -> index of its value in `out`, as claim_member reads it
  for j = 1, #out, 2 do named[out[j]] = j + 1 end
  return claim_member(p, jtype, member, worker, lease_ms, now, true, false, nil, nil, id, out,
    named)
end

-- The claim of `member`, popped off the set of `jtype` (a type with no rules), for `worker`
-- at `now` (`now_s`: int(now)), when it is a plain job (waiting inactive as a job of the
-- type, with no group, prefer, fan-out or trail left), but for its indexes and its start
-- event: its hash read and changed, its reply made as claim_member makes it. Returns the job's
-- id, then the reply and the job's scores in jobs:active and jobs:<type>:active; or, for any
-- other member, its id, nil and its hash as read.
local function plain_take(p, jtype, member, worker, now, now_s)
  local id = zid_id(member)
  local jkey = k_job(p, id)
  local out = redis.call('HGETALL', jkey)
  local at = { false, false, false, false, false, false, false, false, false, false }
  for j = 1, #out, 2 do
    local w = PLAIN_FIELDS[out[j]]
    if w then at[w] = j + 1 end
  end
  if at[10] or not at[1] or out[at[1]] ~= 'inactive' or out[at[2] or 0] ~= jtype then
    return id, nil, out
  end
  local priority = tonumber(out[at[3] or 0]) or 0
  local ttl = tonumber(out[at[4] or 0]) or 0
  local waiting_since = tonumber(out[at[6] or 0]) or now
  local lease = int((tonumber(out[at[7] or 0]) or 0) + 1)
  local trail = now_s .. ',' .. int((tonumber(out[at[5] or 0]) or 0) + 1)
  redis.call('HSET', jkey, 'state', 'active', 'started_at', now_s, 'updated_at', now_s,
    'workerId', worker, 'lease', lease, 'trail', trail)
  -- The reply: the hash as it is now (the fields the claim added appended).
  local last = #out
  out[at[1]] = 'active'
  if at[8] then out[at[8]] = now_s else
    out[last + 1] = 'started_at'; out[last + 2] = now_s; last = last + 2 end
  if at[6] then out[at[6]] = now_s else
    out[last + 1] = 'updated_at'; out[last + 2] = now_s; last = last + 2 end
  if at[9] then out[at[9]] = worker else
    out[last + 1] = 'workerId'; out[last + 2] = worker; last = last + 2 end
  if at[7] then out[at[7]] = lease else
    out[last + 1] = 'lease'; out[last + 2] = lease; last = last + 2 end
  out[last + 1] = 'trail'; out[last + 2] = trail
  -- Not stored: how long it waited, from its last change while waiting (for statistics).
  out[last + 3] = 'waited'; out[last + 4] = int(math.max(0, now - waiting_since))
  table.insert(out, 1, id)
  return id, out, score(state_score('active', priority, 0, ttl, now)), score(priority)
end

-- Claim `member`, popped off the set of `jtype`, a type with no rules, for `worker`: the job
-- as claim_member gives it, or nil for a stale member. A plain job's claim writes what
-- claim_member's would, read and written in fewer steps.
local function claim_popped(p, jtype, member, worker, lease_ms, now)
  local id, job, active, typed = plain_take(p, jtype, member, worker, now, int(now))
  if not job then return claim_read(p, jtype, member, worker, lease_ms, now, id, active) end
  redis.call('ZREM', k_state(p, 'inactive'), member)
  redis.call('RPOP', k_tokens(p, jtype))
  redis.call('ZADD', k_state(p, 'active'), active, member)
  redis.call('ZADD', k_type_state(p, jtype, 'active'), typed, member)
  redis.call('ZADD', k_leases(p), int(now + lease_ms), member)
  publish(p, id, jtype, 'start', cjson.encode(jtype))
  return job
end

-- Claim up to `m` jobs of `jtype`, a type with no rules, for `worker`, appending each to
-- `got` as claim_member gives it: the jobs m successive claims would take, the set's best
-- first. Returns nil when m were claimed, false when the set ran out first (then the type's
-- wake-up tokens, all stale, are cleared). Members popped together cost one ZPOPMIN, and a
-- plain job one HGETALL and one HSET: its index writes go with the others' in one variadic
-- command each (ZREM jobs:inactive, ZADD jobs:active, jobs:<type>:active and leases, RPOP of
-- the tokens). A member popped alone (m = 1, or the last of a batch) goes by claim_popped:
-- for one job the tables of a batch's writes cost more than they save (bench/claim_batch.py).
local function claim_plain(p, jtype, worker, lease_ms, now, m, got)
  local key = k_type_state(p, jtype, 'inactive')
  local left = m
  while left > 0 do
    local want = math.min(left, CLAIM_CHUNK)
    local top = want == 1 and redis.call('ZPOPMIN', key) or redis.call('ZPOPMIN', key, want)
    if want == 1 and top[1] then
      local job = claim_popped(p, jtype, top[1], worker, lease_ms, now)
      if job then
        got[#got + 1] = job
        left = 0
      end
    elseif top[1] then
      local members, active, typed, leases = {}, {}, {}, {}
      local k = 0
      local now_s, until_ms, encoded = int(now), int(now + lease_ms), cjson.encode(jtype)
      for i = 1, #top, 2 do
        local member = top[i]
        local id, job, a, t = plain_take(p, jtype, member, worker, now, now_s)
        if job then
          k = k + 1
          members[k] = member
          active[2 * k - 1] = a
          typed[2 * k - 1] = t
          active[2 * k] = member
          typed[2 * k] = member
          leases[2 * k - 1] = until_ms
          leases[2 * k] = member
          publish(p, id, jtype, 'start', encoded)
        else
          job = claim_read(p, jtype, member, worker, lease_ms, now, id, a)
        end
        if job then
          got[#got + 1] = job
          left = left - 1
        end
      end
      if k > 0 then
        redis.call('ZREM', k_state(p, 'inactive'), unpack(members))
        redis.call('ZADD', k_state(p, 'active'), unpack(active))
        redis.call('ZADD', k_type_state(p, jtype, 'active'), unpack(typed))
        redis.call('ZADD', k_leases(p), unpack(leases))
        if #top == 2 * want then redis.call('RPOP', k_tokens(p, jtype), k) end
      end
    end
    if left > 0 and #top < 2 * want then
      redis.call('DEL', k_tokens(p, jtype))  -- nothing is waiting: every token left is stale
      return false
    end
  end
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
    local out
    if r then
      out = claim_member(p, jtype, top[1], worker, lease_ms, now, true, r)
    else
      out = claim_popped(p, jtype, top[1], worker, lease_ms, now)
    end
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

-- Claim up to `n` jobs for `worker` from the types ARGV[first..#ARGV], tried in that order as
-- claim_first tries them: the jobs n successive claim_first calls would give, in their order.
-- Returns two values: the table of the jobs claimed (each {id, field, value, ...} as claim
-- gives it, with `lease` and `waited`), and, when fewer than n were claimed, what the next
-- claim_first would give (false, {'pins'}, {'paused'}, {'limited', ms}, or with several
-- types {'wait', ...}); nil when n were. A type is drained before the next is tried (what it
-- answered once it had no job holds for the rest of the call: claims of other types do not
-- change it); a type with no rules goes by claim_plain, its index writes one command each.
local function claim_up_to(p, first, worker, lease_ms, now, n)
  local got, waits = {}, nil
  local why
  for i = first, #ARGV do
    local jtype = ARGV[i]
    if rule_of(p, jtype) then
      while #got < n do
        why = claim(p, jtype, worker, lease_ms, now)
        if not why or why[1] == 'paused' or why[1] == 'pins' or why[1] == 'limited' then break end
        got[#got + 1] = why
        why = nil
      end
    else
      why = claim_plain(p, jtype, worker, lease_ms, now, n - #got, got)
    end
    if #got >= n then return got, nil end
    waits = waits or { 'wait' }
    if not why then
      waits[#waits + 1] = ''
    elseif why[1] == 'limited' then
      waits[#waits + 1] = why[2]
    else
      waits[#waits + 1] = why[1]
    end
  end
  if first == #ARGV then return got, why end
  return got, waits
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


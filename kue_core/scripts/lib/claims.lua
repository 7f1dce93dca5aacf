-- Uses     lib/base, lib/keys, lib/members, lib/type_rules, lib/events, lib/finishing,
--          lib/limits, lib/places, lib/taking
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

-- Claim up to `m` jobs of `jtype`, a type with no rules, for `worker`, appending each to
-- `got` as claim_member gives it: the jobs m successive claims would take, the set's best
-- first. Returns nil when m were claimed, false when the set ran out first (then the type's
-- wake-up tokens, all stale, are cleared). Members popped together cost one ZPOPMIN, and a
-- plain job one HGETALL and one HSET: its index writes go with the others' in one variadic
-- command each (ZREM jobs:inactive, ZADD jobs:active and jobs:<type>:active, RPOP of
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
      local members, active, typed = {}, {}, {}
      local k = 0
      local now_s, encoded = int(now), cjson.encode(jtype)
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
-- Returns two values: the table of the jobs claimed (each {field, value, ..., id} as claim
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


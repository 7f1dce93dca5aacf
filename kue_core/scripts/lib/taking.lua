-- Uses     lib/base, lib/keys, lib/members, lib/pins, lib/indexes, lib/events, lib/runs,
--          lib/limits, lib/places
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
  out[#out + 1] = 'waited'; out[#out + 1] = math.max(0, now - waiting_since)  -- see claim_member
  out[#out + 1] = id
  return out
end

-- Claim `member` of the type's inactive set (or, with `pinned`, of `worker`'s places; with
-- `open`, of <p>:open:<type>) for `worker` if it is a job of `jtype` waiting there: move it to
-- active under a new lease and return {field, value, ..., id} of its hash; nil for a stale
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
    publish(p, id, jtype, 'start', cjson.encode(jtype))
  end
  -- Not stored: how long it waited, from its last change while waiting (for statistics), a
  -- number (Redis replies with the integer: no text made for it here).
  out[#out + 1] = 'waited'; out[#out + 1] = math.max(0, now - waiting_since)
  out[#out + 1] = id  -- last: before the fields, it would shift every one of them
  return out
end

-- The fields of a job a claim of a type with no rules looks at, numbered for plain_take,
-- which notes where each is: a job with any of the last four is no plain job.
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
  -- Where the value of each field of PLAIN_FIELDS is in `out` (nil: absent), in locals: a
  -- table of them would be one more made and collected per job.
  local state, typ, pri, ttl_at, made, upd, lease_at, started, wid
  for j = 2, #out, 2 do
    local w = PLAIN_FIELDS[out[j - 1]]
    if not w then  -- not looked at
    elseif w < 5 then
      if w == 1 then state = j elseif w == 2 then typ = j elseif w == 3 then pri = j
      else ttl_at = j end
    elseif w < 10 then
      if w == 5 then made = j elseif w == 6 then upd = j elseif w == 7 then lease_at = j
      elseif w == 8 then started = j else wid = j end
    else
      return id, nil, out  -- a group, prefer, fan-out or trail: no plain job
    end
  end
  if not state or out[state] ~= 'inactive' or out[typ or 0] ~= jtype then
    return id, nil, out
  end
  -- (tonumber is a call: a field the job lacks, as a new job lacks ttl, lease and
  -- attempts, is not handed to it)
  local priority = pri and out[pri]  -- Kue's normal priority, '0', needs no conversion
  priority = priority == '0' and 0 or priority and tonumber(priority) or 0
  local ttl = ttl_at and tonumber(out[ttl_at]) or 0
  local waiting_since = upd and tonumber(out[upd]) or now
  local lease = int((lease_at and tonumber(out[lease_at]) or 0) + 1)
  local trail = now_s .. ',' .. int((made and tonumber(out[made]) or 0) + 1)
  redis.call('HSET', jkey, 'state', 'active', 'started_at', now_s, 'updated_at', now_s,
    'workerId', worker, 'lease', lease, 'trail', trail)
  -- The reply: the hash as it is now (the fields the claim added appended).
  local last = #out
  out[state] = 'active'
  if started then out[started] = now_s else
    out[last + 1] = 'started_at'; out[last + 2] = now_s; last = last + 2 end
  if upd then out[upd] = now_s else
    out[last + 1] = 'updated_at'; out[last + 2] = now_s; last = last + 2 end
  if wid then out[wid] = worker else
    out[last + 1] = 'workerId'; out[last + 2] = worker; last = last + 2 end
  if lease_at then out[lease_at] = lease else
    out[last + 1] = 'lease'; out[last + 2] = lease; last = last + 2 end
  out[last + 1] = 'trail'; out[last + 2] = trail
  -- Not stored: how long it waited, from its last change while waiting (for statistics).
  local waited = now - waiting_since
  out[last + 3] = 'waited'; out[last + 4] = waited > 0 and waited or 0  -- see claim_member
  out[last + 5] = id
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
  publish(p, id, jtype, 'start', cjson.encode(jtype))
  return job
end

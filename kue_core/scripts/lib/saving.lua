-- Uses     lib/base, lib/keys, lib/members, lib/type_rules, lib/pins, lib/indexes, lib/events,
--          lib/attempts, lib/runs, lib/records, lib/payloads, lib/finishing
-- Raises unless the numbers of the job at ARGV[b+1..] are numbers (as tonumber reads them:
-- Lua's arithmetic reads text the same way, in one call instead of five).
local function save_row_numbers(b)
  return ARGV[b + 3] + ARGV[b + 4] + ARGV[b + 5] + ARGV[b + 7] + ARGV[b + 9]
end

-- Whether ARGV[b+1..b+SAVE_WIDTH] is a well-formed job for save_job.
local function save_row_ok(b)
  return ARGV[b + 1] ~= '' and pcall(save_row_numbers, b)
    and (ARGV[b + 10] == '' or pcall(save_records_ok, ARGV[b + 10]))
end

-- No fields (for unpack): never written into.
local NO_FIELDS = {}

-- A new job id from the counter at `ids_key` (Kue's <p>:ids), one no job has: a counter
-- behind the jobs (restored from an older copy, say) is moved on past them. The id, and the
-- id as text (a number made text costs a sprintf each time: keys and members take the text).
local function new_id(p, ids_key)
  local id = redis.call('INCR', ids_key)
  local sid = tostring(id)
  while redis.call('EXISTS', k_job(p, sid)) == 1 do
    id = redis.call('INCR', ids_key)
    sid = tostring(id)
  end
  return id, sid
end

-- save_job for a plain job: no records (tags, words, group, pins, fan-out, retention,
-- trace), no delay or due time, not blocked, no extra fields. The same writes as save_job's
-- for a job saved inactive, in straight lines: most jobs are plain, and each helper call,
-- table and string made on the way costs (bench/instructions.py measures it).
local function save_plain(p, b, sid, jtype, priority, ttl, now)
  -- Each number made text once, here: int()'s per-call table would cost more than it saves.
  local pri, at = string.format('%d', priority), string.format('%d', now)
  local rank = pri  -- the score in the zsets, as score() gives it
  if not (priority % 1 == 0 and priority > -2 ^ 53 and priority < 2 ^ 53) then rank = priority end
  local member = zid(sid)
  local more = NO_FIELDS  -- the optional fields: most jobs have none (no table made)
  if ARGV[b + 6] ~= '' or ttl > 0 or ARGV[b + 8] == '1' then
    more = {}
    if ARGV[b + 6] ~= '' then
      more[#more + 1] = 'backoff'; more[#more + 1] = ARGV[b + 6]
    end
    if ttl > 0 then
      more[#more + 1] = 'ttl'; more[#more + 1] = int(ttl)
    end
    if ARGV[b + 8] == '1' then
      more[#more + 1] = 'removeOnComplete'; more[#more + 1] = 'true'
    end
  end
  redis.call('HSET', k_job(p, sid), 'type', jtype, 'data', ARGV[b + 2],
    'priority', pri, 'state', 'inactive', 'created_at', at, 'promote_at', at,
    'updated_at', at, 'max_attempts', ARGV[b + 5], unpack(more))
  redis.call('ZADD', k_jobs(p), rank, member)
  redis.call('ZADD', k_state(p, 'inactive'), rank, member)  -- state_score: the priority
  redis.call('ZADD', k_type_state(p, jtype, 'inactive'), rank, member)
  redis.call('LPUSH', k_tokens(p, jtype), '1')
  redis.call('SADD', k_types(p), jtype)
  local type_json = cjson.encode(jtype)
  publish(p, sid, jtype, 'enqueue', type_json, type_json)
end

-- Store a new job from ARGV[b+1..b+SAVE_WIDTH] (see save.lua), with `extra` hash fields
-- (a flat list, or nil); index it, publish its events; return its id. With `blocked`, it is
-- saved in state blocked (waiting for dependencies; promote_at is its due time, or 0 when it
-- has none or a delay, which counts from when it is unblocked).
local function save_job(p, ids_key, b, now, extra, blocked)
  -- The row passed save_row_ok: its numbers are read by arithmetic (cheaper than tonumber).
  local jtype, data, priority = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3] + 0
  local delay, ttl, due_at = ARGV[b + 4] + 0, ARGV[b + 7] + 0, ARGV[b + 9] + 0
  if due_at > 0 then delay = math.max(0, due_at - now) end
  local id, sid = new_id(p, ids_key)
  if delay == 0 and not blocked and not extra and ARGV[b + 10] == '' then
    save_plain(p, b, sid, jtype, priority, ttl, now)
    return id
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
  redis.call('ZADD', k_jobs(p), score(priority), zid(id))
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
-- kue_core/jobs/unique.py for the modes), unless a job holds it already; `extra` as save_job's.
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

  -- A duplicate's data written to the payload store goes to the trash: no job holds it.
  local function dropped()
    local rec = ARGV[b + 10] ~= '' and cjson.decode(ARGV[b + 10])
    if rec and type(rec.stored) == 'string' then
      redis.call('RPUSH', k_payload_trash(p), rec.stored)
    end
  end

  local function held(outcome, state)
    if outcome == 'deduplicated' then dropped() end
    -- reset_runs (the records' `reset`): an active fan-out holder's failed runs go.
    if state == 'active' and job.fan_out and ARGV[b + 10] ~= ''
      and cjson.decode(ARGV[b + 10]).reset then
      runs_retry(p, holder, k_job(p, holder), now)
    end
    publish(p, holder, job.type, 'deduplicated', cjson.encode(key))
    return { tonumber(holder), outcome, state }
  end

  if mode == 'throttle' and holder then  -- blocks for its ttl, whatever became of the job
    if not job then
      dropped()
      return { tonumber(holder), 'deduplicated', false }
    end
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
  local words, stored = nil, false  -- the duplicate's data words replace the holder's
  if ARGV[b + 10] ~= '' then
    local rec = cjson.decode(ARGV[b + 10])
    words, stored = rec.words, rec.stored or false
  end
  hold_payload(p, jkey, 'data', stored)
  reword(p, holder, jkey, words)
  if job.state == 'active' or job.state == 'suspended' then
    -- Reuse of a running job: it has the new data next time; of a suspended one: it keeps
    -- waiting for its signal (a duplicate does not skip the wait), with the new data.
    history(p, holder, { state = job.state, at = now, edited = true, unique = key })
    return held('reused', job.state)
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


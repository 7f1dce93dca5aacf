-- Uses     lib/base, lib/keys, lib/members, lib/type_rules, lib/pins, lib/indexes, lib/events,
--          lib/attempts, lib/unique, lib/deps, lib/runs, lib/moves, lib/payloads, lib/retention
-- An error text as a history entry keeps it: its first HISTORY_ERROR_LENGTH bytes, or
-- whole when it is sealed (an encrypted queue's, kue_core/base/sealing.py: a cut one would
-- not open).
local function history_error(text)
  if string.sub(text, 1, 15) == '{"kue:sealed":"' then return text end
  return string.sub(text, 1, HISTORY_ERROR_LENGTH)
end

-- Record how a failed attempt ends, for a job already out of active. `f` holds type,
-- priority, attempts (made, this one included), worker, message (one line), text (kept on
-- the job), promote_at, group and only (and no_retry: true, kept in its history entry, for a
-- job failed for good by NoRetry with attempts left); `outcome` is 'failed' (for good), 'inactive' (retry
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
    error = history_error(f.text), no_retry = f.no_retry })
  local msg = cjson.encode(f.message)
  publish(p, id, f.type, 'error', msg)
  if outcome == 'failed' then
    local u = release_unique_of(p, id)
    local own = u.keep_failed
    count_outcome(p, f.type, 'failed', now, nil)
    publish(p, id, f.type, 'failed', msg)
    if u.dependents then deps_failed(p, id, now) end
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

-- The fields complete_job needs of a job (stored at `key`), in the order of LUA_FIELDS's
-- COMPLETE (kue_core/store/lua_source.py), read by their index constants: h[COMPLETE_FAN_OUT]
-- (a table of named fields would cost every completion more). h[COMPLETE_TYPE] is false when
-- the job does not exist.
local function load_for_complete(key)
  return redis.call('HMGET', key, 'state', 'lease', 'type', 'priority', 'started_at',
    'removeOnComplete', 'attempts', 'max_attempts', 'unique', 'keep_complete', 'dependents',
    'group', 'fan_out', 'trail')
end

-- Store a job (at `key`; `h` as load_for_complete read it) complete with `result` (JSON
-- text), as complete_job and complete_plain do: state, result, duration, progress, attempts
-- and, when its claim left a trail with no completion yet, the completion in the trail too.
-- Returns true when there is no such trail: the completion then goes into its history.
local function hash_complete(key, h, result, now, duration, attempt)
  local at, took, made = int(now), int(duration), int(attempt)
  local trail = h[COMPLETE_TRAIL]
  if trail and not string.find(trail, ',.*,') then  -- the claim's alone: the completion joins it
    redis.call('HSET', key, 'state', 'complete', 'result', result, 'duration', took,
      'progress', '100', 'updated_at', at, 'attempts', made,
      'trail', trail .. ',' .. at .. ',' .. took .. ',' .. made)
    return false
  end
  redis.call('HSET', key, 'state', 'complete', 'result', result, 'duration', took,
    'progress', '100', 'updated_at', at, 'attempts', made)
  return true
end

-- Complete active job `id` (stored at `key`; `h` as load_for_complete reads it) with
-- `result` (JSON text): out of active, its unique key released, counted (unless `tallied`:
-- the worker process that completed it counts it, see kue_core/features/tally.py), its dependents
-- told, then stored complete (or removed, with removeOnComplete) and retention applied.
-- Returns the job's duration (ms).
local function complete_job(p, id, key, h, result, now, tallied)
  local jtype = h[COMPLETE_TYPE]
  local duration = math.max(0, now - (tonumber(h[COMPLETE_STARTED_AT]) or now))
  -- Kue counts a completion as an attempt
  local attempt = next_attempt(h[COMPLETE_ATTEMPTS], h[COMPLETE_MAX_ATTEMPTS])
  leave_active(p, id, jtype, h[COMPLETE_GROUP])
  if h[COMPLETE_UNIQUE] then
    release_unique(p, id, h[COMPLETE_UNIQUE], redis.call('HGET', key, 'unique_mode'))
  end
  if not tallied then
    redis.call('INCRBY', k_work_time(p), duration)
    count_outcome(p, jtype, 'complete', now, duration)
  end
  publish(p, id, jtype, 'complete', result)
  local stored = stored_name(result)  -- its result in the payload store: the job holds it
  if stored then hold_payload(p, key, 'result', stored) end
  if h[COMPLETE_DEPENDENTS] then deps_complete(p, id, result, now) end
  if h[COMPLETE_REMOVE_ON_COMPLETE] == 'true' then
    delete_job(p, id, jtype, nil)
  else
    local untrailed = hash_complete(key, h, result, now, duration, attempt)
    index_add(p, id, jtype, 'complete', tonumber(h[COMPLETE_PRIORITY]) or 0, 0, 0, now)
    if untrailed then
      history(p, id, { state = 'complete', at = now, worker = redis.call('HGET', key, 'workerId'),
        attempt = attempt, duration = duration })
    end
    local own = h[COMPLETE_KEEP_COMPLETE]
    retire(p, 'complete', own, now, RETIRE_BATCH, own or tonumber(id) % RETIRE_BATCH == 0)
  end
  return duration
end

-- Plain jobs completed in one call of complete_batch.lua whose sets are not written yet:
-- their zids (run[1], run[2]...), `run.scored` (priority, zid, ...: jobs:complete's ZADD
-- arguments), their type `run.jtype` while they share one, else `run.types` (each one's),
-- and whether retention looks at ages (`run.ages`, as complete_job's). A plain job: no
-- fan-out, group, dependents, removeOnComplete or policy of its own, and its type has no
-- rules (see complete_batch.lua). Made when its first job comes (nil until then): every
-- table a call makes costs Redis's Lua collector work too.

-- complete_job's steps for a plain job (`h` as load_for_complete read it), but for its
-- sets: those go into `run` (nil: a new one), for plain_flush. Returns its duration (ms)
-- and the run.
local function complete_plain(p, id, key, h, result, now, run)
  local jtype = h[COMPLETE_TYPE]
  local duration = math.max(0, now - (tonumber(h[COMPLETE_STARTED_AT]) or now))
  local attempt = next_attempt(h[COMPLETE_ATTEMPTS], h[COMPLETE_MAX_ATTEMPTS])
  if h[COMPLETE_UNIQUE] then
    release_unique(p, id, h[COMPLETE_UNIQUE], redis.call('HGET', key, 'unique_mode'))
  end
  publish(p, id, jtype, 'complete', result)
  local stored = stored_name(result)
  if stored then hold_payload(p, key, 'result', stored) end
  if hash_complete(key, h, result, now, duration, attempt) then
    history(p, id, { state = 'complete', at = now, worker = redis.call('HGET', key, 'workerId'),
      attempt = attempt, duration = duration })
  end
  run = run or { scored = {}, ages = false }
  local scored = run.scored
  local n = #run + 1
  local member = zid(id)
  run[n] = member
  local priority = h[COMPLETE_PRIORITY]  -- Kue's normal priority, '0', is its own score text
  scored[2 * n - 1] = priority == '0' and priority or score(tonumber(priority) or 0)
  scored[2 * n] = member
  if run.types then
    run.types[n] = jtype
  elseif not run.jtype then
    run.jtype = jtype
  elseif run.jtype ~= jtype then  -- a second type: each one's, from now on
    local types = {}
    for i = 1, n - 1 do types[i] = run.jtype end
    types[n] = jtype
    run.types = types
  end
  run.ages = run.ages or tonumber(id) % RETIRE_BATCH == 0
  return duration, run
end

-- Write the sets of the plain jobs in `run`, one command per set with every member, and
-- apply retention as their completions one by one would (at most RETIRE_BATCH removed
-- each). `run` may be nil (nothing to write). Returns nil: the run to go on with.
local function plain_flush(p, run, now)
  if not run then return nil end
  local members, scored = run, run.scored
  redis.call('ZREM', k_state(p, 'active'), unpack(members))
  redis.call('ZADD', k_state(p, 'complete'), unpack(scored))
  if run.types then  -- several types: each one's sets, with its members
    local active, complete = {}, {}
    for i, jtype in ipairs(run.types) do
      if not active[jtype] then active[jtype], complete[jtype] = {}, {} end
      local a, c = active[jtype], complete[jtype]
      a[#a + 1] = members[i]
      c[#c + 1] = scored[2 * i - 1]; c[#c + 1] = members[i]
    end
    for jtype, a in pairs(active) do
      redis.call('ZREM', k_type_state(p, jtype, 'active'), unpack(a))
      redis.call('ZADD', k_type_state(p, jtype, 'complete'), unpack(complete[jtype]))
    end
  else
    redis.call('ZREM', k_type_state(p, run.jtype, 'active'), unpack(members))
    redis.call('ZADD', k_type_state(p, run.jtype, 'complete'), unpack(scored))
  end
  local at = int(now)
  for i = 1, #scored, 2 do scored[i] = at end  -- by finish time, for retention
  redis.call('ZADD', k_finished(p, 'complete'), unpack(scored))
  retire(p, 'complete', nil, now, RETIRE_BATCH * #members, run.ages)
  return nil
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
  if done < (tonumber(h[COMPLETE_FAN_OUT]) or 0) then
    runs_offer(p, id)
    return 'complete'
  end
  local only = redis.call('HGET', key, 'only')
  stop_runs(p, id, 'the job completed', now)
  runs_close(p, id, h[COMPLETE_TYPE], only)
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
    error = history_error(text) })
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

-- An operator cancels a job that is not complete (`job` as load_job read it): it fails at
-- once, for good, with 'cancelled' or 'cancelled: <reason>' as its error. See cancel.lua's
-- header for all it does; bulk.lua cancels a batch with it.
-- Fail a job that is out of its state's sets for good, by hand: hash, index, history
-- `entry`, counters, its unique key, then the event `first` with `arg` (when given) and
-- failed [message], its dependents' policy, retention (`kept`: the job itself stays, whatever
-- its remove_on_fail, as the caller reads it back).
local function fail_by_hand(p, id, key, job, message, entry, first, arg, kept, now)
  redis.call('HSET', key, 'state', 'failed', 'error', message, 'failed_at', int(now),
    'updated_at', int(now))
  index_add(p, id, job.type, 'failed', job.priority, 0, 0, now)
  history(p, id, entry)
  if job.state ~= 'failed' then count_outcome(p, job.type, 'failed', now, nil) end
  local u = release_unique_of(p, id)
  local own = u.keep_failed
  if first then publish(p, id, job.type, first, arg) end
  publish(p, id, job.type, 'failed', cjson.encode(message))
  if u.dependents then deps_failed(p, id, now) end
  if own == 'remove' then
    if not kept then delete_job(p, id, job.type, 'failed') end
  else
    retire(p, 'failed', own, now, RETIRE_BATCH, own or tonumber(id) % RETIRE_BATCH == 0)
  end
end

local function cancel_job(p, id, key, job, reason, now)
  local message = 'cancelled'
  if reason ~= '' then message = message .. ': ' .. reason end
  leave_state(p, id, key, job, message)
  fail_by_hand(p, id, key, job, message,
    { state = 'failed', at = now, from = job.state, cancelled = reason },
    'cancelled', cjson.encode(reason), true, now)
end

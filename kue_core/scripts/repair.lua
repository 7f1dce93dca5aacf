-- repair: fix what kue doctor found, each fix only if its condition still holds.
-- KEYS[1]  <p>:jobs (every key touched is built from the prefix, same slot)
-- ARGV[1]  prefix   ARGV[2] number of actions n; then 4 values per action: name, a, b, c
--          ('' when unused). A set is named by its key without '<p>:' ('jobs', 'leases' or
--          'jobs:...'); a member is a zset member ('01|7').
--          unindex  set, member: remove the member unless its job belongs in the set.
--          index    set, member: add the job to a set of its state, or give it its score
--                   there; a job added to its type's inactive set gets a wake-up token.
--          types    type: add it to <p>:job:types.
--          tokens   type: push wake-up tokens until there are as many as inactive jobs.
--          requeue  id, stuck after ms, stall limit: an active job whose lease expired (its
--                   own in <p>:leases, from a worker of the version before, or else its
--                   worker's in <p>:worker-leases), or claimed by us (it has a `lease` token
--                   and no Node Kue worker's id: see kue_worker) for a worker holding no
--                   lease, or else (a Kue Node worker's: no lease) with no update for longer
--                   than max(stuck after, ttl), goes back to
--                   inactive, as recover.lua does (failed past the stall limit).
--          settle   id, grace ms: a job with no state (untouched for grace ms) becomes
--                   inactive, or delayed when it has a delay; one with an unknown state fails.
--          purge    id, grace ms: delete a hash that has neither type nor data (untouched
--                   for grace ms), with its log, history and stream.
--          unlog    id, part ('log', 'history', 'deps', 'dependents', 'results', 'runs' or
--                   'stream'): delete that key of a job that does not exist.
--          unblock  id: a job blocked that waits for no job (no member of its deps zset
--                   scored 0, or none) goes on as lib/deps.lua's unblock moves it: inactive, or
--                   delayed while its due time is ahead.
--          sweep    member: what the dependencies sweep (unblock.lua) does for one member of
--                   <p>:awaited whose job has ended or is gone: its dependents follow it. A
--                   member that is no job's is removed.
--          undepend id, dependent: remove the dependent from <p>:job:<id>:dependents when its
--                   job is gone or does not list id in its deps.
--          unworker worker id: drop a worker from <p>:workers when its registration is gone.
--          bound    key (without '<p>:'), limit: a key of the statistics' history
--                   ('history:m|h|d:...') or a bulk action's record ('bulk:<32 hex>')
--                   without an expiry gets one of limit seconds; the audit log ('audit')
--                   longer than limit entries is trimmed to about that.
--          ids      id: raise <p>:ids to the id of an existing job above it.
--          ununique key, id: delete the unique key <p>:unique:<key> (or kue-unique's entry
--                   for it, when the key is 'jobs' and id its field) while it still names id
--                   and that job is gone, or has ended and the key has no expiry.
--          unrecord set, member: remove the member from a records set ('tracked',
--                   'finished:<state>', 'tag:<tag>', 'words:<word>') when its job is gone or
--                   (finished sets) no longer in that state, or it is no job's member; the
--                   tag's count and the word list follow.
--          recount  tag: set its count in <p>:tags to the jobs in <p>:tag:<tag> (none: drop).
--          reword   word: list it in <p>:words exactly when <p>:words:<word> exists; for
--                   '~search', delete the scratch set a search left.
--          unschedule key: remove the schedule from <p>:schedules when its hash is gone (or
--                   holds no definition), or it is paused or has ended.
--          reschedule key: put a schedule neither paused nor ended that is missing from
--                   <p>:schedules back in it, due now (and wake the promotion timers).
--          Flow control (see kue_core/doctor/limits.py; a type's rules: its field of
--          <p>:limits; a group's sets: <p>:group:<type>:<g>, <p>:group-active:<type>:<g>):
--          unlimit  type, text: delete the type's rules while they are still `text` and not a
--                   JSON object; keep the paused flag (type in <p>:paused) and groups (when
--                   <p>:groups:<type> exists, with its member "\0").
--          hold     type: set the paused flag of a type in <p>:paused, as pause.lua does.
--          lane     type: a type with groups gets "\0" in <p>:groups:<type> (score 0); one
--                   with groups there gets the groups flag.
--          group    id: an inactive job of a group goes into its group's set (score: its
--                   priority) and the group into the rotation (its turn last) if missing.
--          group_active id: an active job of a group goes into its group's active set (score:
--                   its started_at) if missing.
--          ungroup  member, type, group: remove the member from the group's set unless it is
--                   an inactive job of that type and group (the group leaves the rotation
--                   when nothing is left in it). ungroup_active: the same for the active set
--                   and active jobs.
--          unturn   type, group: remove the group from <p>:groups:<type> when its set is gone.
--          Pinned jobs (see kue_core/doctor/pins.py):
--          pin      id: a pinned job goes into the places of each of its workers where it is
--                   missing (its workers are woken); one that names no worker waits inactive.
--          unpin    set, member: remove the member from a worker's places (set named without
--                   '<p>:') unless it is a pinned job of that type and worker, or an active
--                   fan-out job of that worker's.
--          Runs of fan-out jobs (see kue_core/doctor/runs.py):
--          unrunlease member: drop <id>@<worker> from <p>:run-leases unless that run runs.
--          runlease id, worker: a running run without a lease gets an expired one (recover.lua
--                   then finds it lost and opens its place again).
--          offer    id: an active fan-out job offers its open places again (lib/runs.lua
--                   runs_offer: into the open set or its eligible workers' places, waking them).
--          unopen   set, member: remove the member from <p>:open:<type> unless it is an active
--                   fan-out job of that type without workers of its own, or from
--                   <p>:late:<type> unless it is an unfinished late-joiners job of that type.
--          Suspended jobs (see kue_core/doctor/signals.py):
--          resume   id: a suspended job whose wait cannot end (its `suspended` field is gone
--                   or unreadable) or whose signal is on it already waits for a worker again
--                   (lib/signals.lua resume_job, by 'doctor').
--          A grouped job that `index` adds to its type's inactive or active set goes into its
--          group's set too.
-- Returns  per action 1 when it changed something, 0 when there was nothing to do (the job
--          moved on since the check).
-- Events   requeue: enqueue [type], or error and failed [reason] past the stall limit;
--          settle: enqueue [type] (inactive), the due time on <p>:promote (delayed), or error
--          and failed [reason]. Both append to the job's history (with doctor = true).
--          unblock: unblocked, then enqueue [type] or the due time on <p>:promote; sweep: as
--          complete.lua and fail.lua give the dependents (unblocked, enqueue, failed...).
--          reschedule: the due time on <p>:promote.
-- Errors   KUE_INVALID for an unknown action or set name (nothing is written).
-- Uses     lib/base (STATES, now_ms, score, int), lib/keys (k_job, k_tokens, k_type_state,
--          k_leases, k_state, k_promote, k_log, k_history, k_deps, k_dependents, k_runs,
--          k_unique_jobs, k_tags, k_words, k_schedules, k_limits, k_groups, k_group_active,
--          k_group, k_places, k_run_leases, k_types, k_worker_leases, k_stream, K), lib/members
--          (zid_id, zid, state_score), lib/type_rules (group_add, rules_read, LANE, set_rule), lib/pins
--          (waiting, pin_list, pin_add), lib/indexes (index_add), lib/events (history,
--          publish), lib/attempts (leave_active, count_attempt, load_job), lib/deps (unblock,
--          load_blocked, awaited_ended), lib/runs (runs_offer), lib/moves (move_job),
--          lib/records (reword), lib/finishing (record_failure), lib/signals (wait_of, resume_job)
local p, n = ARGV[1], tonumber(ARGV[2])
if not n or #ARGV ~= 2 + n * REPAIR_WIDTH then
  return redis.error_reply('KUE_INVALID repair expects ' .. REPAIR_WIDTH .. ' values per action')
end
local ACTIONS = { resume = true, unindex = true, index = true, types = true, tokens = true, requeue = true,
  settle = true, purge = true, unlog = true, unworker = true, ids = true, ununique = true,
  unrecord = true, recount = true, reword = true, unblock = true, sweep = true,
  undepend = true, unschedule = true, reschedule = true, unlimit = true, hold = true,
  lane = true, group = true, group_active = true, ungroup = true, ungroup_active = true,
  unturn = true, pin = true, unpin = true, unrunlease = true, runlease = true, offer = true,
  unopen = true, bound = true }
local function set_name(name)
  return name == 'jobs' or name == 'leases' or string.sub(name, 1, 5) == 'jobs:'
end
for i = 0, n - 1 do
  local b = 2 + i * REPAIR_WIDTH
  local action, a = ARGV[b + 1], ARGV[b + 2]
  local records = a == 'tracked' or string.match(a, '^finished:') or string.match(a, '^tag:')
    or string.match(a, '^words:')
  if not ACTIONS[action] or ((action == 'unindex' or action == 'index') and not set_name(a))
      or (action == 'unrecord' and not records)
      or (action == 'unpin' and not string.match(a, '^places:'))
      or (action == 'unopen' and not (string.match(a, '^open:') or string.match(a, '^late:'))) then
    return redis.error_reply('KUE_INVALID repair action ' .. (i + 1) .. ' is malformed')
  end
end

local function key_type(key) return redis.call('TYPE', key).ok end

-- A finite number, or nil (as kue_core/doctor/judging.py reads numbers: a NaN is no score).
local function num(v)
  local x = tonumber(v)
  if x and x == x and x ~= math.huge and x ~= -math.huge then return x end
  return nil
end

-- The job of id as the indexes see it, or nil when there is none (no hash, or no type).
local function job_of(id)
  if not string.match(id, '^[1-9]%d*$') then return nil end
  local key = k_job(p, id)
  if key_type(key) ~= 'hash' then return nil end
  local h = redis.call('HMGET', key, 'type', 'state', 'priority', 'promote_at', 'ttl', 'group',
    'only', 'fan_out', 'prefer')
  if not h[1] then return nil end
  return { type = h[1], state = h[2] or '', priority = num(h[3]) or 0,
    promote_at = num(h[4]), ttl = num(h[5]) or 0, group = h[6] or nil, only = h[7] or nil,
    fan_out = h[8] or nil, prefer = h[9] or nil }
end

-- Whether job j belongs in the set named `name`, and the score it should have there (nil:
-- any). Mirrors belongs in kue_core/doctor/judging.py.
local function belongs(j, name)
  if not j then return false end
  if name == 'jobs' then return true, j.priority end
  if name == 'leases' then return j.state == 'active' end
  if j.state == '' then return false end
  if name == 'jobs:' .. j.state then
    if not STATES[j.state] or j.state == 'active' then return true end
    if j.state == 'delayed' or j.state == 'suspended' then return true, j.promote_at end
    return true, j.priority
  end
  if name == 'jobs:' .. j.type .. ':' .. j.state then
    if STATES[j.state] then return true, j.priority end
    return true
  end
  return false
end

-- The member's job id, or nil when the member is not a job's ('01|7').
local function member_id(member)
  local id = zid_id(member)
  if string.match(id, '^[1-9]%d*$') and zid(id) == member then return id end
  return nil
end

-- A job's newest write (updated_at, else created_at), or nil when it has neither.
local function last_write(key)
  local h = redis.call('HMGET', key, 'updated_at', 'created_at')
  return num(h[1]) or num(h[2])
end

local now = now_ms()

local function unindex(name, member)
  local key = p .. ':' .. name
  if key_type(key) ~= 'zset' then return 0 end
  local id = member_id(member)
  if id and belongs(job_of(id), name) then return 0 end
  return redis.call('ZREM', key, member)
end

local function index(name, member)
  local id = member_id(member)
  if not id or name == 'leases' then return 0 end  -- only a claim gives a lease
  local j = job_of(id)
  local ok, score = belongs(j, name)
  if not ok or (name ~= 'jobs' and not STATES[j.state]) then return 0 end
  local key = p .. ':' .. name
  local kind = key_type(key)
  if kind ~= 'zset' and kind ~= 'none' then return 0 end
  local current = tonumber(redis.call('ZSCORE', key, member))
  if score == nil then
    if current then return 0 end
    score = state_score(j.state, j.priority, j.promote_at or now, j.ttl, now)
  elseif current == score then
    return 0
  end
  redis.call('ZADD', key, score, member)
  if not current and name == 'jobs:' .. j.type .. ':inactive' then
    redis.call('LPUSH', k_tokens(p, j.type), 1)
  end
  if not current and j.group and name == 'jobs:' .. j.type .. ':' .. j.state
      and (j.state == 'inactive' or j.state == 'active') then
    group_add(p, member, j.type, j.state, j.priority, j.group, now)
  end
  return 1
end

local function tokens(jtype)
  local list = k_tokens(p, jtype)
  local kind = key_type(list)
  if kind ~= 'list' and kind ~= 'none' then return 0 end
  local zset = k_type_state(p, jtype, 'inactive')
  if key_type(zset) ~= 'zset' then return 0 end
  local short = redis.call('ZCARD', zset) - redis.call('LLEN', list)
  if short <= 0 then return 0 end
  while short > 0 do
    local batch = {}
    for _ = 1, math.min(short, 1000) do batch[#batch + 1] = 1 end
    redis.call('LPUSH', list, unpack(batch))
    short = short - #batch
  end
  return 1
end

-- Whether a job's workerId is a Node Kue 0.11 worker's, kue:<hostname>:<pid>:<type>:<n> (as
-- kue_core/doctor/judging.py's kue_worker): its claim takes no lease, and leaves the fencing
-- token of an earlier claim of ours on the job.
local function kue_worker(worker)
  return type(worker) == 'string' and string.match(worker, '^kue:[^:]*:%d+:.*:%d+$') ~= nil
end

local function requeue(id, stuck_after, stall_limit)
  local j = job_of(id)
  if not j or j.state ~= 'active' or not stuck_after or not stall_limit then return 0 end
  if j.fan_out then return 0 end  -- its runs have leases of their own (recover.lua)
  local key, member = k_job(p, id), zid(id)
  local lease = tonumber(redis.call('ZSCORE', k_leases(p), member))
  local worker, token = unpack(redis.call('HMGET', key, 'workerId', 'lease'))
  local held = worker and tonumber(redis.call('ZSCORE', k_worker_leases(p), worker))
  if lease then
    if lease > now then return 0 end
    redis.call('ZREM', k_leases(p), member)
  elseif held then
    if held > now then return 0 end
  elseif not token or kue_worker(worker) then  -- a Kue Node worker's: it takes no lease
    local at = last_write(key)
    if at and now - at <= math.max(stuck_after, j.ttl) then return 0 end
  end
  worker = worker or ''
  leave_active(p, id, j.type, j.group)
  local stalls = redis.call('HINCRBY', key, 'stalls', 1)
  if stalls > stall_limit then
    local reason = 'stalled ' .. stalls .. ' times: its worker stopped (found by kue doctor)'
    record_failure(p, id, {
      type = j.type, priority = j.priority, worker = worker, message = reason, text = reason,
      attempts = count_attempt(key), promote_at = 0, group = j.group,
    }, 'failed', now)
  else
    local state = waiting(j.only)
    redis.call('HSET', key, 'state', state, 'updated_at', int(now))
    index_add(p, id, j.type, state, j.priority, 0, 0, now, j.group)
    history(p, id, { state = state, at = now, from = 'active', worker = worker,
      stalled = stalls, doctor = true })
    publish(p, id, j.type, 'enqueue', cjson.encode(j.type))
  end
  return 1
end

local function settle(id, grace)
  local j = job_of(id)
  if not j or STATES[j.state] or not grace then return 0 end
  local key = k_job(p, id)
  local state = 'failed'
  if j.state == '' then
    local at = last_write(key)
    if at and now - at <= grace then return 0 end  -- a Kue save may still be writing it
    state = waiting(j.only)
    if (tonumber(redis.call('HGET', key, 'delay')) or 0) > 0 then state = 'delayed' end
  else
    redis.call('ZREM', k_state(p, j.state), zid(id))
    redis.call('ZREM', k_type_state(p, j.type, j.state), zid(id))
  end
  local promote_at = j.promote_at or now
  local fields = { 'state', state, 'updated_at', int(now) }
  local reason = 'unknown state ' .. cjson.encode(j.state) .. ' (found by kue doctor)'
  if state == 'failed' then
    fields[#fields + 1] = 'error'; fields[#fields + 1] = reason
    fields[#fields + 1] = 'failed_at'; fields[#fields + 1] = int(now)
  elseif state == 'delayed' and not j.promote_at then
    fields[#fields + 1] = 'promote_at'; fields[#fields + 1] = int(now)
  end
  redis.call('HSET', key, unpack(fields))
  index_add(p, id, j.type, state, j.priority, promote_at, 0, now, j.group)
  local entry = { state = state, at = now, doctor = true }
  if j.state ~= '' then entry.from = j.state end
  if state == 'failed' then entry.error = reason end
  history(p, id, entry)
  if state == 'inactive' or state == 'pinned' then
    publish(p, id, j.type, 'enqueue', cjson.encode(j.type))
  elseif state == 'delayed' then
    redis.call('PUBLISH', k_promote(p), int(promote_at))
  else
    publish(p, id, j.type, 'error', cjson.encode(reason))
    publish(p, id, j.type, 'failed', cjson.encode(reason))
  end
  return 1
end

local function purge(id, grace)
  if not string.match(id, '^[1-9]%d*$') or not grace then return 0 end
  local key = k_job(p, id)
  if key_type(key) ~= 'hash' then return 0 end
  local h = redis.call('HMGET', key, 'type', 'data')
  if h[1] or h[2] then return 0 end
  local at = last_write(key)
  if at and now - at <= grace then return 0 end
  redis.call('DEL', key, k_log(p, id), k_history(p, id), k_stream(p, id))
  return 1
end

local PARTS = { log = k_log, history = k_history, deps = k_deps, dependents = k_dependents,
  results = K.results, runs = k_runs, stream = k_stream }
local function unlog(id, part)
  if not string.match(id, '^[1-9]%d*$') or not PARTS[part] then return 0 end
  if redis.call('EXISTS', k_job(p, id)) == 1 then return 0 end
  return redis.call('DEL', PARTS[part](p, id))
end

-- (Not named unblock: lib/deps.lua's unblock does the move.)
local function release(id)
  local j = job_of(id)
  if not j or j.state ~= 'blocked' then return 0 end
  local deps = k_deps(p, id)
  local kind = key_type(deps)
  if kind ~= 'none' and (kind ~= 'zset' or redis.call('ZCOUNT', deps, 0, 0) > 0) then
    return 0
  end
  local key = k_job(p, id)
  redis.call('HDEL', key, 'blocked_by')
  local b = load_blocked(key)
  b.prefer = false  -- not indexed in its preferred workers' places here
  unblock(p, id, b, now)
  return 1
end

-- The body of unblock.lua's loop, for one member.
local function sweep(member)
  local key = K.awaited(p)
  if key_type(key) ~= 'zset' or not redis.call('ZSCORE', key, member) then return 0 end
  local id = member_id(member)
  if not id then return redis.call('ZREM', key, member) end
  local kind = key_type(k_job(p, id))
  if kind ~= 'hash' and kind ~= 'none' then return 0 end
  return awaited_ended(p, id, now) and 1 or 0
end

local function undepend(id, dependent)
  if not string.match(id, '^[1-9]%d*$') then return 0 end
  local set = k_dependents(p, id)
  if key_type(set) ~= 'set' or redis.call('SISMEMBER', set, dependent) == 0 then return 0 end
  if job_of(dependent) then
    local kind = key_type(k_deps(p, dependent))
    if kind ~= 'zset' and kind ~= 'none' then return 0 end
    if kind == 'zset' and redis.call('ZSCORE', k_deps(p, dependent), id) then return 0 end
  end
  return redis.call('SREM', set, dependent)
end

local function unworker(wid)
  if redis.call('EXISTS', K.worker(p, wid)) == 1 then return 0 end
  return redis.call('ZREM', K.workers(p), wid)
end

local function bound(name, limit)
  local key, most = p .. ':' .. name, tonumber(limit)
  if not most or most < 1 then return 0 end
  if name == 'audit' then
    if key_type(key) ~= 'stream' or redis.call('XLEN', key) <= most then return 0 end
    redis.call('XTRIM', key, 'MAXLEN', '~', most)
    return 1
  end
  local step = string.sub(name, 9, 10)
  local series = string.sub(name, 1, 8) == 'history:' and (step == 'm:' or step == 'h:'
    or step == 'd:')
  if not series and not string.match(name, '^bulk:' .. string.rep('[0-9a-f]', 32) .. '$') then
    return 0
  end
  if redis.call('TTL', key) ~= -1 then return 0 end
  return redis.call('EXPIRE', key, most)
end

local function ids(id)
  local top = tonumber(id)
  local key = p .. ':ids'
  if not top or redis.call('EXISTS', k_job(p, id)) == 0 then return 0 end
  local kind = key_type(key)
  if kind ~= 'string' and kind ~= 'none' then return 0 end
  if (tonumber(redis.call('GET', key)) or 0) >= top then return 0 end
  redis.call('SET', key, id)
  return 1
end

-- Whether a unique key naming job `id` is held by nothing: the job is gone or has ended.
local function unheld(id)
  local state = redis.call('HGET', k_job(p, id), 'state')
  return not redis.call('HGET', k_job(p, id), 'type') or state == 'complete' or state == 'failed'
end

local function ununique(key, id, field)
  if field ~= '' then  -- kue-unique's hash: only a job that is gone frees its key
    if redis.call('HGET', k_unique_jobs(p), field) ~= id
        or redis.call('HGET', k_job(p, id), 'type') then return 0 end
    return redis.call('HDEL', k_unique_jobs(p), field)
  end
  local k = K.unique(p, key)
  if key_type(k) ~= 'string' or redis.call('GET', k) ~= id or redis.call('PTTL', k) ~= -1
      or not unheld(id) then return 0 end
  return redis.call('DEL', k)
end

local function unrecord(name, member)
  local key = p .. ':' .. name
  if key_type(key) ~= 'zset' or not redis.call('ZSCORE', key, member) then return 0 end
  local id = zid_id(member)
  if string.match(id, '^[1-9]%d*$') and zid(id) == member then
    local h = redis.call('HMGET', k_job(p, id), 'type', 'state')
    local state = string.match(name, '^finished:(.*)$')
    if h[1] and (not state or h[2] == state) then return 0 end
  end
  redis.call('ZREM', key, member)
  local tag, word = string.match(name, '^tag:(.*)$'), string.match(name, '^words:(.*)$')
  if tag and key_type(k_tags(p)) == 'zset' and redis.call('ZSCORE', k_tags(p), tag) then
    if tonumber(redis.call('ZINCRBY', k_tags(p), -1, tag)) <= 0 then
      redis.call('ZREM', k_tags(p), tag)
    end
  elseif word and redis.call('EXISTS', key) == 0 and key_type(k_words(p)) == 'zset' then
    redis.call('ZREM', k_words(p), word)
  end
  return 1
end

local function recount(tag)
  if key_type(k_tags(p)) ~= 'zset' then return 0 end
  local real = redis.call('ZCARD', K.tag(p, tag))
  if tonumber(redis.call('ZSCORE', k_tags(p), tag) or 0) == real then return 0 end
  if real == 0 then return redis.call('ZREM', k_tags(p), tag) end
  redis.call('ZADD', k_tags(p), real, tag)
  return 1
end

local function reword(word)
  if word == '~search' then return redis.call('DEL', K.word(p, word)) end
  if key_type(k_words(p)) ~= 'zset' and key_type(k_words(p)) ~= 'none' then return 0 end
  if redis.call('EXISTS', K.word(p, word)) == 1 then
    return redis.call('ZADD', k_words(p), 0, word)
  end
  return redis.call('ZREM', k_words(p), word)
end

-- The schedule's hash fields that decide whether it belongs in <p>:schedules, or nil when
-- its key holds another Redis type (a person must look).
local function schedule_of(key)
  local hkey = K.schedule(p, key)
  local kind = key_type(hkey)
  if kind == 'none' then return {} end
  if kind ~= 'hash' then return nil end
  local h = redis.call('HMGET', hkey, 'definition', 'paused', 'ended')
  return { exists = h[1] ~= false, paused = h[2] == '1', ended = h[3] == '1' }
end

local function unschedule(key)
  local zkey = k_schedules(p)
  if key_type(zkey) ~= 'zset' or not redis.call('ZSCORE', zkey, key) then return 0 end
  local s = schedule_of(key)
  if not s or (s.exists and not s.paused and not s.ended) then return 0 end
  return redis.call('ZREM', zkey, key)
end

local function reschedule(key)
  local zkey = k_schedules(p)
  local kind = key_type(zkey)
  if (kind ~= 'zset' and kind ~= 'none') or redis.call('ZSCORE', zkey, key) then return 0 end
  local s = schedule_of(key)
  if not s or not s.exists or s.paused or s.ended then return 0 end
  redis.call('ZADD', zkey, int(now), key)
  redis.call('PUBLISH', k_promote(p), int(now))
  return 1
end

-- Flow control (one table: the script's locals are near Lua's limit).
local flow = {}

function flow.zset_or_none(key)
  local kind = key_type(key)
  return kind == 'zset' or kind == 'none'
end

-- The type's stored rules ({} for none), or nil when they are not a JSON object or
-- <p>:limits is no hash.
function flow.rule(jtype)
  local kind = key_type(k_limits(p))
  if kind == 'none' then return {} end
  if kind ~= 'hash' then return nil end
  local text = redis.call('HGET', k_limits(p), jtype)
  if not text then return {} end
  local ok, r = pcall(cjson.decode, text)
  if ok and type(r) == 'table' and string.match(text, '^%s*{') then return r end
  return nil
end

function flow.paused(jtype)
  return key_type(K.paused(p)) == 'set' and redis.call('SISMEMBER', K.paused(p), jtype) == 1
end

function flow.unlimit(jtype, text)
  if key_type(k_limits(p)) ~= 'hash' or redis.call('HGET', k_limits(p), jtype) ~= text
      or flow.rule(jtype) then return 0 end
  redis.call('HDEL', k_limits(p), jtype)
  rules_read[jtype] = nil
  local r = {}
  if flow.paused(jtype) then r.paused = true end
  local rot = k_groups(p, jtype)
  if key_type(rot) == 'zset' then
    r.groups = true
    redis.call('ZADD', rot, 'NX', 0, LANE)
  end
  if next(r) ~= nil then set_rule(p, jtype, r) end
  return 1
end

function flow.hold(jtype)
  local r = flow.rule(jtype)
  if not r or r.paused == true or not flow.paused(jtype) then return 0 end
  r.paused = true
  set_rule(p, jtype, r)
  return 1
end

function flow.lane(jtype)
  local r, rot = flow.rule(jtype), k_groups(p, jtype)
  if not r or not flow.zset_or_none(rot) then return 0 end
  local changed = 0
  local lane = redis.call('ZSCORE', rot, LANE)
  if not r.groups and redis.call('ZCARD', rot) > (lane and 1 or 0) then
    r.groups = true
    set_rule(p, jtype, r)
    changed = 1
  end
  if r.groups and not lane then
    redis.call('ZADD', rot, 0, LANE)
    changed = 1
  end
  return changed
end

function flow.group(id, state)
  local j = job_of(id)
  if not j or j.state ~= state or not j.group then return 0 end
  local member = zid(id)
  if state == 'active' then
    local set = k_group_active(p, j.type, j.group)
    if not flow.zset_or_none(set) or redis.call('ZSCORE', set, member) then return 0 end
    local started = num(redis.call('HGET', k_job(p, id), 'started_at')) or now
    redis.call('ZADD', set, started, member)
    return 1
  end
  local set, rot = k_group(p, j.type, j.group), k_groups(p, j.type)
  if not flow.zset_or_none(set) or not flow.zset_or_none(rot) then return 0 end
  if redis.call('ZSCORE', set, member) and redis.call('ZSCORE', rot, j.group) then return 0 end
  group_add(p, member, j.type, 'inactive', j.priority, j.group, now)
  return 1
end

function flow.ungroup(member, jtype, g, state)
  local set = k_group(p, jtype, g)
  if state == 'active' then set = k_group_active(p, jtype, g) end
  if key_type(set) ~= 'zset' or not redis.call('ZSCORE', set, member) then return 0 end
  local id = member_id(member)
  local j = id and job_of(id)
  if j and j.type == jtype and j.state == state and j.group == g then return 0 end
  redis.call('ZREM', set, member)
  if state == 'inactive' and g ~= LANE and redis.call('EXISTS', set) == 0
      and key_type(k_groups(p, jtype)) == 'zset' then
    redis.call('ZREM', k_groups(p, jtype), g)
  end
  return 1
end

function flow.unturn(jtype, g)
  local rot = k_groups(p, jtype)
  if g == LANE or key_type(rot) ~= 'zset' or not redis.call('ZSCORE', rot, g)
      or redis.call('EXISTS', k_group(p, jtype, g)) == 1 then return 0 end
  return redis.call('ZREM', rot, g)
end

-- Pinned jobs (see kue_core/doctor/pins.py).
local pins = {}

function pins.pin(id)
  local j = job_of(id)
  if not j or j.state ~= 'pinned' then return 0 end
  if #pin_list(j.only) == 0 then  -- no worker to wait for: any worker's
    move_job(p, id, k_job(p, id), j, 'inactive', now)
    return 1
  end
  local member, r = zid(id), 0
  for _, w in ipairs(pin_list(j.only)) do
    local set = k_places(p, j.type, w)
    if flow.zset_or_none(set) and not redis.call('ZSCORE', set, member) then r = 1 end
  end
  if r == 1 then pin_add(p, member, j.type, j.priority, j.only) end
  return r
end

-- The zset `name` (named without '<p>:') and the job of its `member` (nil when none), or nil
-- when the set does not hold that member.
local function held(name, member)
  local set = p .. ':' .. name
  if key_type(set) ~= 'zset' or not redis.call('ZSCORE', set, member) then return nil end
  local id = member_id(member)
  return set, id and job_of(id), id
end

function pins.unpin(name, member)
  local set, j = held(name, member)
  if not set then return 0 end
  -- A pinned job's workers' places, or an active fan-out job's (its open places), or an
  -- inactive job's preferred workers' places.
  if j and (j.state == 'pinned' or (j.state == 'active' and j.fan_out)) then
    for _, w in ipairs(pin_list(j.only)) do
      if k_places(p, j.type, w) == set then return 0 end
    end
  end
  if j and j.state == 'inactive' then
    for _, w in ipairs(pin_list(j.prefer)) do
      if k_places(p, j.type, w) == set then return 0 end
    end
  end
  return redis.call('ZREM', set, member)
end

-- Runs of fan-out jobs (see kue_core/doctor/runs.py).
local runs = {}

-- The run of worker `w` of job `id` when it is running, or nil.
local function running_run(id, w)
  if not string.match(id, '^[1-9]%d*$') or key_type(k_runs(p, id)) ~= 'hash' then return nil end
  local ok, run = pcall(cjson.decode, redis.call('HGET', k_runs(p, id), w) or '')
  if ok and type(run) == 'table' and run.state == 'running' then return run end
  return nil
end

-- Drop run lease `member` (<id>@<worker>) unless its run is running.
function runs.unrunlease(member)
  local at = string.find(member, '@', 1, true)
  if at and running_run(string.sub(member, 1, at - 1), string.sub(member, at + 1)) then
    return 0
  end
  if key_type(k_run_leases(p)) ~= 'zset' then return 0 end
  return redis.call('ZREM', k_run_leases(p), member)
end

-- Give the running run of worker `w` of job `id` that has no lease an expired one: lease
-- recovery then finds it lost (its place opens again).
function runs.runlease(id, w)
  if not running_run(id, w) or not flow.zset_or_none(k_run_leases(p)) then return 0 end
  return redis.call('ZADD', k_run_leases(p), 'NX', 0, id .. '@' .. w)
end

-- Offer the open places of active fan-out job `id` again.
function runs.offer(id)
  local j = job_of(id)
  if not (j and j.state == 'active' and j.fan_out) then return 0 end
  return math.min(runs_offer(p, id), 1)
end

-- Remove `member` from the open or late set `name` (named without '<p>:') unless it belongs.
function runs.unopen(name, member)
  local set, j, id = held(name, member)
  if not set then return 0 end
  if j and j.fan_out then
    if name == 'open:' .. j.type and j.state == 'active' and not j.only then return 0 end
    if name == 'late:' .. j.type and j.state ~= 'complete' and j.state ~= 'failed'
      and redis.call('HGET', k_job(p, id), 'late') then
      return 0
    end
  end
  return redis.call('ZREM', set, member)
end

-- A suspended job whose wait cannot end, or whose signal came, waits for a worker again.
local function resume(id)
  local key = k_job(p, id)
  local j = load_job(key)
  if not j or j.state ~= 'suspended' then return 0 end
  local name = wait_of(key).name
  if type(name) ~= 'string' or name == '' then name = nil end
  if name and redis.call('HEXISTS', key, 'signal:' .. name) == 0 then return 0 end
  resume_job(p, id, key, j, name or '', 'doctor', now)
  return 1
end

local done = {}
for i = 0, n - 1 do
  local b = 2 + i * REPAIR_WIDTH
  local action, a, x, y = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
  local r = 0
  if action == 'unindex' then
    r = unindex(a, x)
  elseif action == 'index' then
    r = index(a, x)
  elseif action == 'types' then
    local kind = key_type(k_types(p))
    if kind == 'set' or kind == 'none' then r = redis.call('SADD', k_types(p), a) end
  elseif action == 'tokens' then
    r = tokens(a)
  elseif action == 'requeue' then
    r = requeue(a, tonumber(x), tonumber(y))
  elseif action == 'settle' then
    r = settle(a, tonumber(x))
  elseif action == 'purge' then
    r = purge(a, tonumber(x))
  elseif action == 'unlog' then
    r = unlog(a, x)
  elseif action == 'unworker' then
    r = unworker(a)
  elseif action == 'ids' then
    r = ids(a)
  elseif action == 'bound' then
    r = bound(a, x)
  elseif action == 'ununique' then
    r = ununique(a, x, y)
  elseif action == 'unrecord' then
    r = unrecord(a, x)
  elseif action == 'recount' then
    r = recount(a)
  elseif action == 'reword' then
    r = reword(a)
  elseif action == 'unblock' then
    r = release(a)
  elseif action == 'sweep' then
    r = sweep(a)
  elseif action == 'undepend' then
    r = undepend(a, x)
  elseif action == 'unschedule' then
    r = unschedule(a)
  elseif action == 'reschedule' then
    r = reschedule(a)
  elseif action == 'unlimit' then
    r = flow.unlimit(a, x)
  elseif action == 'hold' then
    r = flow.hold(a)
  elseif action == 'lane' then
    r = flow.lane(a)
  elseif action == 'group' then
    r = flow.group(a, 'inactive')
  elseif action == 'group_active' then
    r = flow.group(a, 'active')
  elseif action == 'ungroup' then
    r = flow.ungroup(a, x, y, 'inactive')
  elseif action == 'ungroup_active' then
    r = flow.ungroup(a, x, y, 'active')
  elseif action == 'unturn' then
    r = flow.unturn(a, x)
  elseif action == 'pin' then
    r = pins.pin(a)
  elseif action == 'unpin' then
    r = pins.unpin(a, x)
  elseif action == 'unrunlease' then
    r = runs.unrunlease(a)
  elseif action == 'runlease' then
    r = runs.runlease(a, x)
  elseif action == 'offer' then
    r = runs.offer(a)
  elseif action == 'unopen' then
    r = runs.unopen(a, x)
  elseif action == 'resume' then
    r = resume(a)
  end
  done[#done + 1] = r
end
return done

-- complete_batch: a worker finished k jobs; store their results, and claim up to n jobs for the
-- slots they free, all in one call.
-- KEYS[1]  <p>:leases (every key shares the prefix's hash tag: any of them routes the call)
-- ARGV[1]  prefix   ARGV[2] k, the completions   ARGV[3..3k+2] per completion: id, fencing
--          token, result (JSON)
-- ARGV[3k+3] worker id ('' = claim nothing)   ARGV[3k+4] lease ms   ARGV[3k+5] n, the jobs to
--          claim at most   ARGV[3k+6..] the types to claim from, in order (last: see
--          claim_up_to)
-- Returns  {reports, jobs, why}: reports, per completion in order, its time, its duration
--          (ms) and its outcome, as complete.lua returns them with ARGV[5] '1' (the caller
--          counts every completion: see kue_core/features/tally.py); jobs, each claimed job as
--          claim.lua returns it ({id, field, value, ...}); why, when fewer than n were
--          claimed and no job was waiting or the types held their jobs back, claim.lua's
--          answer without a job ({'paused'}, {'pins'}, {'limited', ms}, or {'wait', ...} for
--          several types), else {}.
-- Events   per completion as complete.lua: complete [result] (run complete [worker] for a
--          fan-out run), remove [type] when removeOnComplete, unblocked and enqueue [type]
--          for jobs that waited only for it; remove [type] for each job retention removes;
--          start [type] for each claim.
-- Uses     lib/base (now_ms, int, score), lib/keys (k_job, k_leases, k_state, k_type_state,
--          k_finished), lib/members (zid), lib/type_rules (rule_of), lib/events (publish,
--          history), lib/attempts (next_attempt), lib/unique (release_unique),
--          lib/retention (retire),
--          lib/finishing (load_for_complete, run_complete, complete_job, runs_rewake),
--          lib/claims (claim_first)
-- A plain job (no fan-out, group, dependents, removeOnComplete, policy of its own, in a type
-- without rules) completes as complete_job completes it, but the sets it leaves and enters
-- are written for a run of them at once (one ZREM or ZADD with every member: leases,
-- jobs:active, jobs:<type>:active, jobs:complete, jobs:<type>:complete, finished:complete),
-- and retention looks once for the run, removing as many as its completions one by one
-- would (at most RETIRE_BATCH each). Any other job completes as complete.lua completes it,
-- once the run before it is written (so that retention sees what it would see). The same
-- job twice in one call is refused the second time.
local p = ARGV[1]
local k = tonumber(ARGV[2])
if not k then return redis.error_reply('KUE_INVALID the count of completions must be a number') end
local now = now_ms()

-- Claim up to `n` jobs for `worker`, each as claim_first gives one, stopping at the first
-- answer without a job: the jobs and that answer ({} when n were claimed or none waits).
-- (lib/claims.lua's claim_up_to, in the meantime: the same contract.)
local function claim_up_to(p, first, worker, lease_ms, now, n)
  local jobs = {}
  for _ = 1, n do
    local got = claim_first(p, first, worker, lease_ms, now)
    if not got then return jobs, {} end
    local head = got[1]
    if head == 'paused' or head == 'pins' or head == 'limited' or head == 'wait' then
      return jobs, got
    end
    jobs[#jobs + 1] = got
  end
  return jobs, {}
end

local reports = {}
-- The plain jobs completed since the last flush: their members, and what the sets get.
local members, done, finished, typed, ages

local function begin()
  members, done, finished = {}, {}, {}
  typed = {}  -- type -> {active = members, complete = {score, member, ...}}
  ages = false
end

-- Write the pending plain jobs' sets, one command per set, and apply retention as their
-- completions one by one would have (at most RETIRE_BATCH removed each).
local function flush()
  if #members == 0 then return end
  redis.call('ZREM', k_leases(p), unpack(members))
  redis.call('ZREM', k_state(p, 'active'), unpack(members))
  for jtype, t in pairs(typed) do
    redis.call('ZREM', k_type_state(p, jtype, 'active'), unpack(t.active))
  end
  redis.call('ZADD', k_state(p, 'complete'), unpack(done))
  for jtype, t in pairs(typed) do
    redis.call('ZADD', k_type_state(p, jtype, 'complete'), unpack(t.complete))
  end
  redis.call('ZADD', k_finished(p, 'complete'), unpack(finished))
  retire(p, 'complete', nil, now, RETIRE_BATCH * #members, ages)
  begin()
end

-- complete_job's steps for a plain job, its sets' writes left for flush.
local function complete_plain(id, key, h, jtype, result)
  local duration = math.max(0, now - (tonumber(h[COMPLETE_STARTED_AT]) or now))
  local attempt = next_attempt(h[COMPLETE_ATTEMPTS], h[COMPLETE_MAX_ATTEMPTS])
  release_unique(p, id, h[COMPLETE_UNIQUE], h[COMPLETE_UNIQUE_MODE])
  publish(p, id, jtype, 'complete', result)
  local fields = { 'state', 'complete', 'result', result, 'duration', int(duration),
    'progress', '100', 'updated_at', int(now), 'attempts', int(attempt) }
  local trail = h[COMPLETE_TRAIL]
  trail = trail and not string.find(trail, ',.*,') and trail
  if trail then
    fields[13] = 'trail'
    fields[14] = trail .. ',' .. int(now) .. ',' .. int(duration) .. ',' .. int(attempt)
  end
  redis.call('HSET', key, unpack(fields))
  if not trail then
    history(p, id, { state = 'complete', at = now, worker = h[COMPLETE_WORKER_ID],
      attempt = attempt, duration = duration })
  end
  local member = zid(id)
  local priority = score(tonumber(h[COMPLETE_PRIORITY]) or 0)
  local t = typed[jtype]
  if not t then
    t = { active = {}, complete = {} }
    typed[jtype] = t
  end
  members[#members + 1] = member
  t.active[#t.active + 1] = member
  t.complete[#t.complete + 1] = priority; t.complete[#t.complete + 1] = member
  done[#done + 1] = priority; done[#done + 1] = member
  finished[#finished + 1] = int(now); finished[#finished + 1] = member
  ages = ages or tonumber(id) % RETIRE_BATCH == 0
  return duration
end

begin()
local fanned = {}  -- the types of fan-out jobs among these
for i = 3, 2 + 3 * k, 3 do
  local id, token, result = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local key = k_job(p, id)
  local h = load_for_complete(key)
  local jtype = h[COMPLETE_TYPE]
  local at, duration, outcome = '', '', 'refused'
  if jtype and h[COMPLETE_FAN_OUT] then
    fanned[jtype] = true
    if h[COMPLETE_STATE] == 'active' then
      flush()  -- what came before is written first, as k calls would have
      outcome = run_complete(p, id, key, token, result, now)  -- counted there
    end
  elseif jtype and h[COMPLETE_STATE] == 'active' and h[COMPLETE_LEASE] == token then
    outcome, at = 'complete', now
    if h[COMPLETE_GROUP] or h[COMPLETE_DEPENDENTS] or h[COMPLETE_KEEP_COMPLETE]
      or h[COMPLETE_REMOVE_ON_COMPLETE] == 'true' or rule_of(p, jtype) then
      flush()
      duration = complete_job(p, id, key, h, result, now, true)
    else
      duration = complete_plain(id, key, h, jtype, result)
    end
  end
  reports[#reports + 1] = at
  reports[#reports + 1] = duration
  reports[#reports + 1] = outcome
end
flush()

local jobs, why = {}, {}
local w = 3 + 3 * k
local worker, lease_ms, n = ARGV[w], tonumber(ARGV[w + 1]), tonumber(ARGV[w + 2]) or 0
if worker and worker ~= '' and lease_ms and n > 0 and #ARGV > w + 2 then
  jobs, why = claim_up_to(p, w + 3, worker, lease_ms, now, n)
  for jtype in pairs(fanned) do runs_rewake(p, jtype) end  -- see claim_after
end
return { reports, jobs, why }

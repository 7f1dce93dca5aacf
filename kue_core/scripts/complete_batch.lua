-- complete_batch: a worker finished k jobs; store their results, and claim up to n jobs for the
-- slots they free, all in one call.
-- KEYS[1]  <p>:leases (every key shares the prefix's hash tag: any of them routes the call)
-- ARGV[1]  prefix   ARGV[2] k, the completions   ARGV[3..3k+2] per completion: id, fencing
--          token, result (JSON)
-- ARGV[3k+3] worker id ('' = claim nothing)   ARGV[3k+4] lease ms   ARGV[3k+5] n, the jobs to
--          claim at most   ARGV[3k+6..] the types to claim from, in order (last: see
--          claim_up_to)
-- Returns  one flat list (a nested reply costs Redis a conversion per table; and the first
--          claimed job's table is the reply, the rest put at its end, as complete.lua's):
--          each claimed job as claim.lua returns it ({field, value, ..., id}), one after
--          another; why fewer than n were claimed, when no job was waiting or the types held
--          theirs back, claim.lua's answer without a job ('paused', 'pins', 'limited' ms, or
--          'wait' and one per type; nothing else); per completion in order, its time, its
--          duration (ms) and its outcome, as complete.lua returns them with ARGV[5] '1' (the
--          caller counts every completion: see kue_core/features/tally.py); then the length
--          of why, the length of each job claimed, and last how many were.
-- Events   per completion as complete.lua: complete [result] (run complete [worker] for a
--          fan-out run), remove [type] when removeOnComplete, unblocked and enqueue [type]
--          for jobs that waited only for it; remove [type] for each job retention removes;
--          start [type] for each claim.
-- Uses     lib/base (now_ms), lib/keys (k_job), lib/type_rules (rule_of),
--          lib/events (events_coming), lib/payloads (unheld_payload),
--          lib/finishing (load_for_complete, run_complete, complete_job, complete_plain,
--          plain_flush, runs_rewake),
--          lib/claims (claim_first, claim_up_to)
-- A plain job (no fan-out, group, dependents, removeOnComplete, policy of its own, in a type
-- without rules) completes as complete_job completes it, but the sets it leaves and enters
-- are written for a run of them at once (one ZREM or ZADD with every member:
-- jobs:active, jobs:<type>:active, jobs:complete, jobs:<type>:complete, finished:complete),
-- and retention looks once for the run, removing as many as its completions one by one
-- would (at most RETIRE_BATCH each). Any other job completes as complete.lua completes it,
-- once the run before it is written (so that retention sees what it would see); so does a
-- lone completion (k = 1: the same commands, without the run's tables). The same job twice
-- in one call is refused the second time.
local p = ARGV[1]
local k = tonumber(ARGV[2])
if not k then return redis.error_reply('KUE_INVALID the count of completions must be a number') end
local now = now_ms()
events_coming(k + (tonumber(ARGV[5 + 3 * k]) or 0))  -- a complete per job, a start per claim

-- Sized for one completion and the counts after it: a table that grows is copied each time.
local reports = k == 1 and { '', '', '', 0, 0 } or {}
local run = nil  -- the plain jobs whose sets are not written yet (see complete_plain)
local fanned = nil  -- the types of fan-out jobs among these
for i = 3, 2 + 3 * k, 3 do
  local id, token, result = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local key = k_job(p, id)
  local h = load_for_complete(key)
  local jtype = h[COMPLETE_TYPE]
  local at, duration, outcome = '', '', 'refused'
  if jtype and h[COMPLETE_FAN_OUT] then
    fanned = fanned or {}
    fanned[jtype] = true
    if h[COMPLETE_STATE] == 'active' then
      run = plain_flush(p, run, now)  -- what came before is written first, as k calls would
      outcome = run_complete(p, id, key, token, result, now)  -- counted there
    end
  elseif jtype and h[COMPLETE_STATE] == 'active' and h[COMPLETE_LEASE] == token then
    outcome, at = 'complete', now
    if h[COMPLETE_GROUP] or h[COMPLETE_DEPENDENTS] or h[COMPLETE_KEEP_COMPLETE]
      or h[COMPLETE_REMOVE_ON_COMPLETE] == 'true' or rule_of(p, jtype) or k == 1 then
      run = plain_flush(p, run, now)
      duration = complete_job(p, id, key, h, result, now, true)
    else
      duration, run = complete_plain(p, id, key, h, result, now, run)
    end
  end
  if outcome == 'refused' then unheld_payload(p, result) end
  reports[i - 2] = at
  reports[i - 1] = duration
  reports[i] = outcome
end
plain_flush(p, run, now)

local w = 3 + 3 * k
local worker, lease_ms, n = ARGV[w], tonumber(ARGV[w + 1]), tonumber(ARGV[w + 2]) or 0
if not (worker and worker ~= '' and lease_ms and n > 0 and #ARGV > w + 2) then
  reports[3 * k + 1] = 0  -- no why
  reports[3 * k + 2] = 0  -- no job
  return reports
end
-- The claims: the first job claimed (its table becomes the reply), all of them (when more
-- than one was asked), and why no more (claim_first's answer without a job, or nothing).
local first, more, why = nil, nil, nil
if n == 1 then  -- claim_first's answer as it is: no list made
  local got = claim_first(p, w + 3, worker, lease_ms, now)
  local head = got and got[1]
  if head and head ~= 'paused' and head ~= 'pins' and head ~= 'limited' and head ~= 'wait' then
    first = got
  else
    why = got or nil
  end
else
  local jobs
  jobs, why = claim_up_to(p, w + 3, worker, lease_ms, now, n)
  first, more = jobs[1], jobs
end
if fanned then
  for jtype in pairs(fanned) do runs_rewake(p, jtype) end  -- see claim_after
end
-- The reply: the first job's table (or why's), the rest appended.
local out = first or why or {}
local width = first and #first or 0
local at = #out
if more then
  for j = 2, #more do
    local job = more[j]
    for x = 1, #job do out[at + x] = job[x] end
    at = at + #job
  end
end
local because = why and #why or 0
if first and why then
  for j = 1, because do out[at + j] = why[j] end
  at = at + because
end
for j = 1, 3 * k do out[at + j] = reports[j] end
at = at + 3 * k
out[at + 1] = because
local count = 0
if first then
  count = 1
  out[at + 2] = width
end
if more then
  for j = 2, #more do out[at + 1 + j] = #more[j] end
  count = #more
end
out[at + 2 + count] = count
return out

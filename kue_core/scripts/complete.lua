-- complete: a worker finished a job; store its result, and optionally claim the next one.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] fencing token   ARGV[4] result (JSON)
-- ARGV[5]  '1': the caller counts the completion (work time, outcome counters; see
--          kue_core/features/tally.py), '': this script does
-- ARGV[6]  worker id   ARGV[7] lease ms (both '' = claim nothing)
-- Returns  {next..., outcome}: the next job of the same type claimed for this worker, as
--          claim.lua returns it (nothing when none or not asked); last the outcome, 'complete',
--          or 'refused' when the job is not active under this token (recovered and given to
--          another worker, or moved by hand; nothing is written). With ARGV[5] '1' the outcome
--          follows the completion's time and duration (ms), both '' when there is nothing for
--          the caller to count (refused, or a fan-out job: counted here). (Last, not first:
--          a reply put together at its end is not moved in memory.)
-- Events   complete [result]; remove [type] when removeOnComplete, and for each job retention
--          removes; start [type] for the claim; unblocked, then enqueue [type] (or nothing
--          more when delayed), for each job that waited only for this one.
-- Uses     lib/base (now_ms), lib/payloads (unheld_payload), lib/finishing
--          (load_for_complete, run_complete, complete_job), lib/claims (claim_after)
-- The job's unique key is released (until_done, debounce); retention removes at most
-- RETIRE_BATCH older completed jobs (see lib/retention.lua retire).
-- The jobs that depend on it no longer wait for it, and get its result (see lib/deps.lua
-- deps_complete): those that wait for no other are unblocked here, once.
-- The completion counts as an attempt (as in Kue), up to max_attempts and never past it.
-- A fan-out job (see lib/runs.lua runs_of): the token is one of its running runs', which completes
-- (event run complete [worker]); the job completes as above once k runs have, with the
-- result {worker: result, ...}; 'refused' when no running run has the token.
local p, id, token, result = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local tallied = ARGV[5] == '1'
local h = load_for_complete(KEYS[1])
local jtype = h[COMPLETE_TYPE]
if not jtype then
  unheld_payload(p, result)  -- the job was removed meanwhile
  return tallied and { '', '', 'refused' } or { 'refused' }
end
local now = now_ms()
local outcome, duration = 'refused', ''
if h[COMPLETE_FAN_OUT] then
  if h[COMPLETE_STATE] == 'active' then
    outcome = run_complete(p, id, KEYS[1], token, result, now)
  end
elseif h[COMPLETE_STATE] == 'active' and h[COMPLETE_LEASE] == token then
  outcome = 'complete'
  duration = complete_job(p, id, KEYS[1], h, result, now, tallied)
end
local out = claim_after(p, jtype, 6, now, h[COMPLETE_FAN_OUT])
if tallied then
  out[#out + 1] = duration == '' and '' or now
  out[#out + 1] = duration
end
out[#out + 1] = outcome
if outcome == 'refused' then unheld_payload(p, result) end
return out

-- complete: a worker finished a job; store its result, and optionally claim the next one.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] fencing token   ARGV[4] result (JSON)
-- ARGV[5]  worker id   ARGV[6] lease ms (both '' = claim nothing)
-- Returns  {outcome, next...}: outcome 'complete', or 'refused' when the job is not active
--          under this token (recovered and given to another worker, or moved by hand; nothing
--          is written); then the next job of the same type claimed for this worker, as
--          claim.lua returns it (empty when none or not asked).
-- Events   complete [result]; remove [type] when removeOnComplete, and for each job retention
--          removes; start [type] for the claim; unblocked, then enqueue [type] (or nothing
--          more when delayed), for each job that waited only for this one.
-- The job's unique key is released (until_done, debounce); retention removes at most
-- RETIRE_BATCH older completed jobs (see lib.lua retire).
-- The jobs that depend on it no longer wait for it, and get its result (see lib.lua
-- deps_complete): those that wait for no other are unblocked here, once.
-- The completion counts as an attempt (as in Kue), up to max_attempts and never past it.
-- A fan-out job (see lib.lua runs_of): the token is one of its running runs', which completes
-- (event run complete [worker]); the job completes as above once k runs have, with the
-- result {worker: result, ...}; 'refused' when no running run has the token.
local p, id, token, result = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local h = load_for_complete(KEYS[1])
local jtype = h[3]
if not jtype then return { 'refused' } end
local now = now_ms()
local outcome = 'refused'
if h[15] then
  if h[1] == 'active' then outcome = run_complete(p, id, KEYS[1], token, result, now) end
elseif h[1] == 'active' and h[2] == token then
  outcome = 'complete'
  complete_job(p, id, KEYS[1], h, result, now)
end
local out = claim_after(p, jtype, 5, now, h[15])
table.insert(out, 1, outcome)
return out

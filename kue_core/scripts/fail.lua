-- fail: a worker's attempt at a job failed; retry it, delay it, or fail it for good.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] fencing token
-- ARGV[4]  error message (one line)   ARGV[5] error text kept on the job (message, traceback)
-- ARGV[6]  retry delay ms: 0 = retry at once, > 0 = after this backoff, -1 = never retry
-- ARGV[7]  worker id   ARGV[8] lease ms (both '' = claim nothing)
-- Returns  {next..., outcome}: the next job claimed, as complete.lua returns it; last the
--          outcome, 'inactive' (retry now), 'delayed' (retry after the delay), 'failed' (no
--          attempts left, or never retry), or 'refused' when the job is not active under this
--          token (nothing is written).
-- Events   error [message]; then failed attempt [message, attempts made] and enqueue [type]
--          (or nothing more when delayed), or failed [message]; start [type] for the claim;
--          remove [type] for the job when it fails for good with remove_on_fail(True), and
--          for each finished job retention removes (at most RETIRE_BATCH; see lib/retention.lua retire).
-- Uses     lib/base (now_ms, int), lib/attempts (next_attempt, leave_active),
--          lib/finishing (run_fail, record_failure), lib/claims (claim_after)
-- The attempt counts up to max_attempts and never past it (Kue's Job#attempt). A job failed
-- for good by a "never retry" (-1) with attempts left has no_retry: true in its history entry.
-- A fan-out job (see lib/runs.lua runs_of): the token is one of its running runs', which fails;
-- outcome 'inactive' when its place opens again, 'failed' past max_failed_runs failed runs
-- (error 'run on <worker> failed: <message>'; its other running runs stop, their workers are
-- told on their control channels), 'refused' when no running run has the token. The retry
-- delay is ignored for runs.
local p, id, token, message, text = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local delay = tonumber(ARGV[6])
if not delay then return redis.error_reply('KUE_INVALID retry delay must be a number') end
local state, lease, jtype, priority, most, worker, made, group, only, fan_out = unpack(
  redis.call('HMGET', KEYS[1], 'state', 'lease', 'type', 'priority', 'max_attempts',
    'workerId', 'attempts', 'group', 'only', 'fan_out'))
if not jtype then return { 'refused' } end
local now = now_ms()
local outcome = 'refused'
if fan_out then
  if state == 'active' then outcome = run_fail(p, id, KEYS[1], token, message, text, now) end
elseif state == 'active' and lease == token then
  local attempts = next_attempt(made, most)
  redis.call('HSET', KEYS[1], 'attempts', int(attempts))
  outcome = 'failed'
  if delay >= 0 and attempts < (tonumber(most) or MAX_ATTEMPTS) then
    outcome = delay > 0 and 'delayed' or 'inactive'
  end
  leave_active(p, id, jtype, group)
  record_failure(p, id, {
    type = jtype, priority = tonumber(priority) or 0, attempts = attempts, worker = worker,
    message = message, text = text, promote_at = now + math.max(delay, 0), group = group,
    only = only, no_retry = delay < 0 and attempts < (tonumber(most) or MAX_ATTEMPTS) or nil,
  }, outcome, now)
end
local out = claim_after(p, jtype, 7, now, fan_out)
out[#out + 1] = outcome
return out

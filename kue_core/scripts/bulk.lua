-- bulk: one batch of an action on every job of a state (optionally of one type).
-- KEYS[1]  <p>:jobs:<state> or <p>:jobs:<type>:<state>
-- ARGV[1]  prefix   ARGV[2] state   ARGV[3] action: a state to move the jobs to (not active),
--          'remove' or 'cancel'   ARGV[4] most jobs to handle in this call
-- ARGV[5]  the reason of a cancel ('' for none; unused by the other actions)
-- ARGV[6..] members of KEYS[1] (optional): these jobs only (those still in the state), as
--          many as ARGV[4] at most, instead of the first of the set (a filter chose them).
-- Returns  {handled, left}: jobs moved, removed or cancelled by this call, and jobs still in
--          KEYS[1].
-- Events   as set_state.lua for each job moved, as remove.lua for each removed, as
--          cancel.lua for each cancelled.
-- Uses     lib/base (STATES, now_ms), lib/keys (k_job), lib/members (zid_id),
--          lib/attempts (load_job), lib/moves (move_job), lib/retention (delete_job),
--          lib/finishing (cancel_job)
-- A removed job that others are blocked waiting for is a failure for them: they follow their
-- policy (see lib/deps.lua dep_failed); so is a cancelled one (as cancel.lua).
-- Errors   KUE_INVALID for an unknown state or action, for moving or removing active jobs
--          (only a worker's claim or a worker's end, or a cancel, changes an active job in
--          bulk), for moving jobs to pinned (only a job's own workers pin it) and pinned jobs
--          to inactive (a job with workers of its own waits pinned), for cancelling complete
--          or failed jobs.
-- The caller calls again while `left` is not 0, so that no call blocks Redis for long.
local p, state, action, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local reason = ARGV[5] or ''
if action == 'cancel' then
  if not STATES[state] or state == 'complete' or state == 'failed' then
    return redis.error_reply('KUE_INVALID only jobs that have not ended can be cancelled, not '
      .. state .. ' ones')
  end
elseif not STATES[state] or state == 'active' then
  return redis.error_reply('KUE_INVALID bulk actions apply to inactive, delayed, complete '
    .. 'or failed jobs, not ' .. state)
end
local moves = action ~= 'remove' and action ~= 'cancel'
if moves and (not STATES[action] or action == 'active' or action == 'blocked'
    or action == 'pinned' or action == 'suspended' or action == state or (state == 'pinned' and action == 'inactive')) then
  return redis.error_reply('KUE_INVALID cannot move ' .. state .. ' jobs to ' .. action)
end
if not limit or limit < 1 then return redis.error_reply('KUE_INVALID limit must be positive') end
local now = now_ms()
local handled = 0
local members = {}
if #ARGV > 5 then
  if #ARGV - 5 > limit then return redis.error_reply('KUE_INVALID more jobs than the limit') end
  for i = 6, #ARGV do members[#members + 1] = ARGV[i] end
else
  members = redis.call('ZRANGE', KEYS[1], 0, limit - 1)
end
for _, member in ipairs(members) do
  local id = zid_id(member)
  local key = k_job(p, id)
  local job = load_job(key)
  if job and job.state == state then
    if action == 'remove' then
      delete_job(p, id, job.type, job.state)
    elseif action == 'cancel' then
      cancel_job(p, id, key, job, reason, now)
    else
      move_job(p, id, key, job, action, now)
    end
    handled = handled + 1
  else
    redis.call('ZREM', KEYS[1], member)  -- left by an interrupted client: not in this state
  end
end
return { handled, redis.call('ZCARD', KEYS[1]) }

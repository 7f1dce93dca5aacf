-- recover: return jobs whose lease expired (their worker died or hung) to the queue (inactive,
-- or pinned for a job with workers of its own).
-- KEYS[1]  <p>:leases
-- ARGV[1]  prefix   ARGV[2] stall limit   ARGV[3] most jobs to handle in this call
-- Returns  {requeued, failed}: jobs sent back to wait, and jobs failed because they
--          stalled more than the stall limit.
-- Events   enqueue [type] per job requeued; error and failed [reason] per job failed (then
--          remove [type] as retention removes, see fail.lua).
-- Uses     lib/base (now_ms, int), lib/keys (k_job, k_run_leases), lib/members (zid_id),
--          lib/pins (waiting), lib/indexes (index_remove, index_add), lib/events (history,
--          publish), lib/attempts (count_attempt), lib/finishing (record_failure, run_lost)
-- A recovered job's stall count (`stalls`) goes up by one; its attempts do not, since the
-- attempt never ended. Several processes may run it at once: each expired lease is handled once.
-- A fan-out job's run whose lease expired (<p>:run-leases) is lost: the job's stalls go up;
-- past the stall limit the job fails for good (its other runs stop, their workers are told),
-- counted in `failed`; else its place opens again (the same worker may take it), counted in
-- `requeued`.
local p, limit_stalls, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not limit_stalls or limit_stalls < 0 or not limit or limit < 1 then
  return redis.error_reply('KUE_INVALID recover arguments are malformed')
end
local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
local requeued, failed = 0, 0
for _, member in ipairs(expired) do
  redis.call('ZREM', KEYS[1], member)
  local id = zid_id(member)
  local key = k_job(p, id)
  local state, jtype, priority, worker, group, only = unpack(
    redis.call('HMGET', key, 'state', 'type', 'priority', 'workerId', 'group', 'only'))
  if state == 'active' then
    local stalls = redis.call('HINCRBY', key, 'stalls', 1)
    index_remove(p, id, jtype, 'active', group)
    priority = tonumber(priority) or 0
    if stalls > limit_stalls then
      local reason = 'stalled ' .. stalls .. ' times: the worker running it stopped renewing '
        .. 'its lease (it died, hung, or lost Redis)'
      record_failure(p, id, {
        type = jtype, priority = priority, worker = worker, message = reason, text = reason,
        attempts = count_attempt(key), promote_at = 0, group = group,
      }, 'failed', now)
      failed = failed + 1
    else
      state = waiting(only)  -- pinned, for a job with workers of its own
      redis.call('HSET', key, 'state', state, 'updated_at', int(now))
      index_add(p, id, jtype, state, priority, 0, 0, now, group)
      history(p, id, { state = state, at = now, from = 'active', worker = worker,
        stalled = stalls })
      publish(p, id, jtype, 'enqueue', cjson.encode(jtype))
      requeued = requeued + 1
    end
  end
end
-- Runs of fan-out jobs whose lease expired (<p>:run-leases, member <id>@<worker>).
local runs = redis.call('ZRANGEBYSCORE', k_run_leases(p), '-inf', now, 'LIMIT', 0, limit)
for _, member in ipairs(runs) do
  redis.call('ZREM', k_run_leases(p), member)
  local at = string.find(member, '@', 1, true)
  if at then
    local id, w = string.sub(member, 1, at - 1), string.sub(member, at + 1)
    local key = k_job(p, id)
    if redis.call('HGET', key, 'state') == 'active' then
      local got = run_lost(p, id, key, w, nil, true, limit_stalls, now)
      if got == 'failed' then
        failed = failed + 1
      elseif got then
        requeued = requeued + 1
      end
    end
  end
end
return { requeued, failed }

-- recover: return the jobs of workers that died or hung to the queue (inactive, or pinned for a
-- job with workers of its own).
-- KEYS[1]  <p>:leases (the per-job leases of workers before the lease per process)
-- ARGV[1]  prefix   ARGV[2] stall limit   ARGV[3] most jobs to handle in this call
-- Returns  {requeued, failed}: jobs sent back to wait, and jobs failed because they
--          stalled more than the stall limit.
-- Events   enqueue [type] per job requeued; error and failed [reason] per job failed (then
--          remove [type] as retention removes, see fail.lua).
-- Uses     lib/base (now_ms, int), lib/keys (k_job, k_state, k_run_leases, k_worker_leases,
--          k_recovering, k_worker), lib/members (zid_id), lib/pins (waiting), lib/indexes
--          (index_remove, index_add), lib/events (history, publish), lib/attempts
--          (count_attempt), lib/finishing (record_failure, run_lost)
-- A job is held by its worker process's lease (<p>:worker-leases, see heartbeat.lua). A worker
-- whose lease expired goes into <p>:recovering (field worker id, value '<expiry>:<cursor>'),
-- and its jobs are found by scanning <p>:jobs:active (ZSCAN, a step of at most `limit`
-- members a call, the cursor kept there across calls): a job is recovered when its `workerId`
-- is that worker and it started at or before the expiry (a worker held up that came back
-- claims jobs after its expiry: those are its own). When the scan ends, the worker's entry is
-- dropped from both, unless its lease was renewed since; but a worker that claimed jobs after
-- its expiry (it was alive then) and did not renew its lease since gets one from its last such
-- claim ('<expiry>:<cursor>:<last claim>' while scanning; its registration's lease_ms, else
-- 0), so that those jobs are recovered too should it have died before its heartbeat.
-- Upgrade: a job claimed by a worker of the version before has an entry in <p>:leases (member
-- zid, score its expiry), renewed by that worker; an expired one is dropped here, and its job
-- recovered when it is active under a worker holding no process lease (else the job was
-- claimed again under the new scheme: the entry was left behind by a script that no longer
-- drops it, since a job's end writes nothing about leases).
-- A recovered job's stall count (`stalls`) goes up by one; its attempts do not, since the
-- attempt never ended. Several processes may run it at once: each job is recovered once.
-- A fan-out job's run whose lease expired (<p>:run-leases) is lost: the job's stalls go up;
-- past the stall limit the job fails for good (its other runs stop, their workers are told),
-- counted in `failed`; else its place opens again (the same worker may take it), counted in
-- `requeued`.
local p, limit_stalls, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not limit_stalls or limit_stalls < 0 or not limit or limit < 1 then
  return redis.error_reply('KUE_INVALID recover arguments are malformed')
end
local now = now_ms()
local requeued, failed = 0, 0

-- Requeue (or fail, past the stall limit) active job `id` stored at `key`, of type `jtype`,
-- run by `worker` (its hash's other fields as named).
local function stalled(id, key, jtype, priority, worker, group, only)
  priority = tonumber(priority) or 0
  local stalls = redis.call('HINCRBY', key, 'stalls', 1)
  index_remove(p, id, jtype, 'active', group)
  if stalls > limit_stalls then
    local reason = 'stalled ' .. stalls .. ' times: the worker running it stopped renewing '
      .. 'its lease (it died, hung, or lost Redis)'
    record_failure(p, id, {
      type = jtype, priority = priority, worker = worker, message = reason, text = reason,
      attempts = count_attempt(key), promote_at = 0, group = group,
    }, 'failed', now)
    failed = failed + 1
  else
    local state = waiting(only)  -- pinned, for a job with workers of its own
    redis.call('HSET', key, 'state', state, 'updated_at', int(now))
    index_add(p, id, jtype, state, priority, 0, 0, now, group)
    history(p, id, { state = state, at = now, from = 'active', worker = worker,
      stalled = stalls })
    publish(p, id, jtype, 'enqueue', cjson.encode(jtype))
    requeued = requeued + 1
  end
end

local leases, recovering = k_worker_leases(p), k_recovering(p)
-- Jobs of workers of the version before whose lease expired (<p>:leases).
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
for _, member in ipairs(expired) do
  redis.call('ZREM', KEYS[1], member)
  local id = zid_id(member)
  local key = k_job(p, id)
  local state, jtype, priority, worker, group, only, fan_out = unpack(redis.call('HMGET', key,
    'state', 'type', 'priority', 'workerId', 'group', 'only', 'fan_out'))
  if state == 'active' and not fan_out and not redis.call('ZSCORE', leases, worker or '') then
    stalled(id, key, jtype, priority, worker, group, only)
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
-- Workers whose lease expired: recovered from the expiry, unless already being recovered from
-- a later one.
local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
for i = 1, #dead, 2 do
  local was = redis.call('HGET', recovering, dead[i])
  local at = was and tonumber(string.match(was, '^(%d+)'))
  if not at or at < tonumber(dead[i + 1]) then
    redis.call('HSET', recovering, dead[i], int(dead[i + 1]) .. ':0')
  end
end
-- Their jobs: a step of the scan of jobs:active for each, `limit` members in all.
local budget = limit
local active = k_state(p, 'active')
local each = redis.call('HGETALL', recovering)
for i = 1, #each, 2 do
  if budget <= 0 then break end
  local wid = each[i]
  local expiry, cursor, later = string.match(each[i + 1], '^(%d+):(%d+):?(%d*)$')
  expiry, later = tonumber(expiry), tonumber(later)
  if not expiry then
    redis.call('HDEL', recovering, wid)  -- not ours: nothing to resume
  else
    repeat
      local step = redis.call('ZSCAN', active, cursor, 'COUNT', budget)
      cursor = step[1]
      local members = step[2]
      budget = budget - #members / 2
      for k = 1, #members, 2 do
        local id = zid_id(members[k])
        local key = k_job(p, id)
        local state, worker, started, fan_out, jtype, priority, group, only = unpack(
          redis.call('HMGET', key, 'state', 'workerId', 'started_at', 'fan_out', 'type',
            'priority', 'group', 'only'))
        started = tonumber(started) or 0
        if state == 'active' and worker == wid and not fan_out then
          if started <= expiry then
            stalled(id, key, jtype, priority, worker, group, only)
          elseif not later or started > later then
            later = started  -- claimed after its expiry: it was alive then
          end
        end
      end
    until cursor == '0' or budget <= 0
    if cursor == '0' then
      redis.call('HDEL', recovering, wid)
      local renewed = tonumber(redis.call('ZSCORE', leases, wid))
      if renewed and renewed <= expiry then
        if later then
          -- Jobs it claimed once back, and no heartbeat since: they are held by a lease from
          -- its last claim on, recovered in turn should that one expire too.
          local ms = tonumber(redis.call('HGET', k_worker(p, wid), 'lease_ms')) or 0
          redis.call('ZADD', leases, later + ms, wid)
        else
          redis.call('ZREM', leases, wid)
        end
      end
    else
      local seen = later and ':' .. int(later) or ''
      redis.call('HSET', recovering, wid, int(expiry) .. ':' .. cursor .. seen)
    end
  end
end
return { requeued, failed }

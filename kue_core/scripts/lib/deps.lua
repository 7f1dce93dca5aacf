-- Uses     lib/base, lib/keys, lib/members, lib/pins, lib/indexes, lib/events, lib/attempts
-- The fields of a blocked job (stored at `key`) that dep_done and unblock read, by name
-- (false when absent; `type` false when the job does not exist).
local function load_blocked(key)
  local h = redis.call('HMGET', key, 'type', 'priority', 'promote_at', 'delay', 'state',
    'blocked_by', 'group', 'only', 'prefer')
  return { type = h[1], priority = h[2], promote_at = h[3], delay = h[4], state = h[5],
    blocked_by = h[6], group = h[7], only = h[8], prefer = h[9] }
end

-- Move blocked job `did` (`b` as load_blocked reads it) to inactive (pinned, for a job with
-- workers of its own), or to delayed while its due time is ahead (a due time stays; a delay
-- in ms counts from now).
local function unblock(p, did, b, now)
  local at = tonumber(b.promote_at) or 0
  if at == 0 and (tonumber(b.delay) or 0) > 0 then at = now + tonumber(b.delay) end
  local state = waiting(b.only)
  if at > now then state = 'delayed' else at = now end
  index_remove(p, did, b.type, 'blocked')
  redis.call('HSET', k_job(p, did), 'state', state, 'promote_at', int(at), 'updated_at',
    int(now))
  index_add(p, did, b.type, state, tonumber(b.priority) or 0, at, 0, now, b.group,
    b.prefer or false)
  history(p, did, { state = state, at = now, from = 'blocked', unblocked = true })
  publish(p, did, b.type, 'unblocked', '')
  if state == 'delayed' then
    redis.call('PUBLISH', k_promote(p), int(at))
  else
    publish(p, did, b.type, 'enqueue', cjson.encode(b.type))
  end
end

-- Job `id`, a dependency of `did`, is done (completed with `result`, its JSON; or failed
-- under the policy ignore, `result` nil): `did` no longer waits for it, and is unblocked when
-- it waits for no other. Once per pair: a second call changes nothing but the result kept.
local function dep_done(p, did, id, result, now)
  local key, deps = k_job(p, did), k_deps(p, did)
  local b = load_blocked(key)
  if not b.type then return end  -- removed by a Node Kue client: kue doctor's to tidy
  if result then redis.call('HSET', k_results(p, did), id, result) end
  if redis.call('ZADD', deps, 'XX', 'CH', 1, id) == 0 then return end
  if b.blocked_by == tostring(id) then redis.call('HDEL', key, 'blocked_by') end
  if b.state == 'blocked' and redis.call('ZCOUNT', deps, 0, 0) == 0 then unblock(p, did, b, now) end
end

-- Every job waiting for job `id` stops waiting for it: `id` completed with `result` (JSON).
local function deps_complete(p, id, result, now)
  redis.call('ZREM', k_awaited(p), zid(id))
  for _, did in ipairs(redis.call('SMEMBERS', k_dependents(p, id))) do
    dep_done(p, did, id, result, now)
  end
end

-- Blocked job `did`, waiting for job `fid`, which failed for good, follows its policy
-- (`policy`: its on_dep_fail): ignore (as if `fid` were done), fail (it fails at once; its id
-- goes on the list `failed`, for its own dependents), or wait (it stays blocked, with
-- `blocked_by` = fid, until `fid`, retried, completes).
local function dep_failed(p, did, fid, policy, now, failed)
  if policy == 'ignore' then
    dep_done(p, did, fid, nil, now)
    return
  end
  local key = k_job(p, did)
  if policy ~= 'fail' then
    redis.call('HSET', key, 'blocked_by', fid)
    history(p, did, { state = 'blocked', at = now, blocked_by = tonumber(fid) })
    return
  end
  local message = 'dependency ' .. fid .. ' failed'
  local h = redis.call('HMGET', key, 'type', 'priority')
  index_remove(p, did, h[1], 'blocked')
  redis.call('HSET', key, 'state', 'failed', 'error', message, 'failed_at', int(now),
    'updated_at', int(now))
  index_add(p, did, h[1], 'failed', tonumber(h[2]) or 0, 0, 0, now)
  history(p, did, { state = 'failed', at = now, from = 'blocked', error = message })
  count_outcome(p, h[1], 'failed', now, nil)
  publish(p, did, h[1], 'error', cjson.encode(message))
  publish(p, did, h[1], 'failed', cjson.encode(message))
  failed[#failed + 1] = did
end

-- Job `id` failed for good (a worker's last attempt, a stall, a cancel, or by hand): each job
-- blocked waiting for it follows its policy (see dep_failed), and so on down for those that
-- fail in turn.
local function deps_failed(p, id, now)
  local failed, i = { id }, 1
  while i <= #failed do
    local fid = failed[i]
    i = i + 1
    redis.call('ZREM', k_awaited(p), zid(fid))
    for _, did in ipairs(redis.call('SMEMBERS', k_dependents(p, fid))) do
      local h = redis.call('HMGET', k_job(p, did), 'state', 'on_dep_fail')
      if h[1] == 'blocked' and redis.call('ZSCORE', k_deps(p, did), fid) == '0' then
        dep_failed(p, did, fid, h[2], now, failed)
      end
    end
  end
end

-- If job `id`, awaited by others, has ended (complete, failed, or gone: removed without our
-- scripts), its dependents follow as if our scripts had ended it; returns whether it had.
local function awaited_ended(p, id, now)
  local h = redis.call('HMGET', k_job(p, id), 'state', 'result')
  if h[1] == 'complete' then
    deps_complete(p, id, h[2] or 'null', now)
  elseif h[1] == 'failed' or not h[1] then
    deps_failed(p, id, now)
  else
    return false
  end
  return true
end

-- Job `id` (stored at `key`, flags `u` as release_unique_of gives them) just ended `state`
-- ('complete' or 'failed') without a worker's report: the jobs that depend on it follow.
local function deps_ended(p, id, key, u, state, now)
  if not u.dependents then return end
  if state == 'complete' then
    deps_complete(p, id, redis.call('HGET', key, 'result') or 'null', now)
  else
    deps_failed(p, id, now)
  end
end


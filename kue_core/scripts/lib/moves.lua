-- Uses     lib/base, lib/keys, lib/members, lib/pins, lib/indexes, lib/events, lib/attempts,
--          lib/unique, lib/deps, lib/runs
-- Move a job (`job` as load_job gives it, stored at `key`) to `state`, which is not
-- 'active' and not its current state ('inactive' means pinned for a job with workers of its
-- own): indexes, hash, history, and the events of the move.
-- A failed job moved back to inactive or delayed gets its attempts anew (a manual retry);
-- a fan-out job moved back to waiting starts over (runs_reset).
local function move_job(p, id, key, job, state, now)
  if state == 'inactive' then state = waiting(job.only) end
  if job.fan_out then
    runs_leave(p, id, job, 'moved to ' .. state, now)
    if state ~= 'complete' and state ~= 'failed' then
      runs_reset(p, id, key, job.type, job.priority)
    end
  end
  if job.state == 'active' then
    leave_active(p, id, job.type, job.group)  -- its lease ends: complete, fail are refused
  elseif STATES[job.state] then
    index_remove(p, id, job.type, job.state, job.group, job.prefer)
  end
  local fields = { 'state', state, 'updated_at', int(now) }
  if job.state == 'suspended' then  -- its wait ends: its deadline is no due time
    redis.call('HDEL', key, 'suspended')
    job.promote_at = now
    fields[#fields + 1] = 'promote_at'; fields[#fields + 1] = int(now)
  end
  if state == 'delayed' and job.promote_at == 0 then
    job.promote_at = now
    fields[#fields + 1] = 'promote_at'; fields[#fields + 1] = int(now)
  end
  redis.call('HSET', key, unpack(fields))
  if job.state == 'failed' and (state == 'inactive' or state == 'pinned' or state == 'delayed')
  then
    redis.call('HDEL', key, 'attempts')
  end
  index_add(p, id, job.type, state, job.priority, job.promote_at, job.ttl, now, job.group,
    job.prefer or false)
  history(p, id, { state = state, at = now, from = job.state })
  if state == 'complete' or state == 'failed' then
    deps_ended(p, id, key, release_unique_of(p, id), state, now)
  elseif job.state == 'complete' or job.state == 'failed' then
    -- Back from the dead by hand: it holds its key again, unless another job took it, and
    -- is awaited again by the jobs that depend on it (the sweep sees Node Kue end it).
    local u = redis.call('HMGET', key, 'unique', 'unique_mode', 'dependents')
    if u[1] and releases_at_end(u[2]) then
      redis.call('SET', k_unique(p, u[1]), tostring(id), 'NX')
    end
    if u[3] then redis.call('ZADD', k_awaited(p), 'NX', now, zid(id)) end
  end
  if job.state == 'delayed' and (state == 'inactive' or state == 'pinned') then
    publish(p, id, job.type, 'promotion', '')
  end
  if state == 'inactive' or state == 'pinned' then
    publish(p, id, job.type, 'enqueue', cjson.encode(job.type))
  elseif state == 'delayed' then
    redis.call('PUBLISH', k_promote(p), int(job.promote_at))
  end
end

-- Take a job out of the sets of its state before it changes state or type by hand (`job` as
-- load_job gives it); a running job's worker is told its attempt is over (see tell_worker).
local function leave_state(p, id, key, job, reason)
  if job.state == 'suspended' then  -- its wait ends (cancelled, moved to another type)
    redis.call('HDEL', key, 'suspended')
    redis.call('HSET', key, 'promote_at', int(now_ms()))
  end
  if job.fan_out then runs_leave(p, id, job, reason, now_ms()) end
  if job.fan_out and job.state == 'active' then
    leave_active(p, id, job.type, job.group)  -- its runs were told (runs_leave)
  elseif job.state == 'active' then
    local h = redis.call('HMGET', key, 'workerId', 'lease')
    leave_active(p, id, job.type, job.group)
    tell_worker(p, h[1], id, h[2], reason)
  else
    index_remove(p, id, job.type, job.state, job.group, job.prefer)
  end
end

-- Records (see kue_core/features/records.py). A job's search words are those of its data (hash field
-- `words`, space separated) and of its tags (`tagwords`, a JSON list of space-separated words,
-- one entry per entry of `tags`, the JSON list of its tags).


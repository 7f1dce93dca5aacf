-- Uses     lib/base, lib/pins, lib/indexes, lib/events, lib/finishing
-- Signals (see kue_core/features/signals.py). A handler that raises WaitForSignal ends its
-- attempt and its job is `suspended`: out of active, in the sets of that state (the global
-- set's score is the wait's deadline, its `promote_at` (SIGNAL_FOREVER without one), so that
-- promote.lua finds the waits that timed out), holding no slot and no lease, its hash's
-- `suspended` field {"name", "until", "on_timeout"}. A signal is a hash field
-- `signal:<name>` (its payload as JSON; `signals` counts them), kept whether the job waits
-- for it or not; the one it waits for resumes it, once. A job resumed (by its signal, or its
-- wait's timeout) has `resumed` {"name", "by", "at"}.

-- What the suspended job at `key` waits for: its `suspended` field decoded, {} when it is
-- gone or unreadable (its `name`, `until`, `on_timeout` are then nil).
local function wait_of(key)
  local ok, w = pcall(cjson.decode, redis.call('HGET', key, 'suspended') or '')
  if ok and type(w) == 'table' then return w end
  return {}
end

-- A suspended job (`job` as load_job gives it, stored at `key`) waits for a worker again:
-- resumed by signal `name`, `by` 'signal' or 'timeout'.
local function resume_job(p, id, key, job, name, by, now)
  index_remove(p, id, job.type, 'suspended', job.group, job.prefer)
  local state = waiting(job.only)
  redis.call('HSET', key, 'state', state, 'updated_at', int(now), 'promote_at', int(now),
    'resumed', cjson.encode({ name = name, by = by, at = now }))
  redis.call('HDEL', key, 'suspended')
  index_add(p, id, job.type, state, job.priority, 0, 0, now, job.group, job.prefer or false)
  history(p, id, { state = state, at = now, from = 'suspended', signal = name, by = by })
  publish(p, id, job.type, 'resumed', cjson.encode(name))
  publish(p, id, job.type, 'enqueue', cjson.encode(job.type))
end

-- A suspended job whose wait's deadline passed: resumed, or failed for good, as its handler
-- chose (the `on_timeout` of its `suspended` field).
local function wait_timed_out(p, id, key, job, now)
  local w = wait_of(key)
  local name = tostring(w.name or '')
  if w.on_timeout ~= 'fail' then return resume_job(p, id, key, job, name, 'timeout', now) end
  index_remove(p, id, job.type, 'suspended', job.group, job.prefer)
  redis.call('HDEL', key, 'suspended')
  fail_by_hand(p, id, key, job, 'timed out waiting for signal ' .. name,
    { state = 'failed', at = now, from = 'suspended', signal = name, by = 'timeout' }, nil, nil,
    false, now)
end

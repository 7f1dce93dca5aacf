-- Uses     lib/base, lib/keys, lib/members, lib/indexes, lib/events, lib/unique, lib/deps,
--          lib/runs, lib/records, lib/payloads
-- Delete a job, its log and history, and every index entry it may have (the sets of every
-- state, and of `state` when it is not one of Kue's; its unique key, tags, words, tracking,
-- dependencies); publish remove. Jobs still blocked waiting for it follow their policy, as
-- for a job failed for good.
local function delete_job(p, id, jtype, state)
  local unique, mode, words, tags, tagwords, tracked, depends, dependents, group, fan_out, only,
    prefer, stored, streamed = unpack(redis.call('HMGET', k_job(p, id), 'unique', 'unique_mode',
      'words', 'tags', 'tagwords', 'tracked', 'depends', 'dependents', 'group', 'fan_out',
      'only', 'prefer', 'payloads', 'streamed'))
  release_unique(p, id, unique, mode)
  if mode == 'reuse' and redis.call('HGET', k_unique_jobs(p), unique) == tostring(id) then
    redis.call('HDEL', k_unique_jobs(p), unique)
  end
  if words or tagwords then index_words(p, id, job_words(words, tagwords), {}) end
  for _, tag in ipairs(json_list(tags)) do index_tag(p, id, tag, nil) end
  if tracked then redis.call('ZREM', k_tracked(p), zid(id)) end
  if depends then  -- it no longer waits: the jobs it depends on forget it
    for _, d in ipairs(redis.call('ZRANGE', k_deps(p, id), 0, -1)) do
      redis.call('SREM', k_dependents(p, d), id)
    end
    redis.call('DEL', k_deps(p, id), k_results(p, id))
  end
  if dependents then  -- the jobs depending on it keep its id, and the result it handed them
    -- Those still waiting for it (a bulk remove) take its removal as a failure: their policy.
    deps_failed(p, id, now_ms())
    redis.call('DEL', k_dependents(p, id))
    redis.call('ZREM', k_awaited(p), zid(id))
  end
  if fan_out then  -- a fan-out job: its runs stop, their leases and its places go
    stop_runs(p, id, 'removed', now_ms())
    runs_close(p, id, jtype, only)
    redis.call('DEL', k_runs(p, id))
  end
  for s in pairs(STATES) do  -- only a job with workers of its own can be pinned
    -- (only a job with workers of its own can be pinned, only a suspended one suspended)
    if (s ~= 'pinned' or only) and (s ~= 'suspended' or state == 'suspended') then
      index_remove(p, id, jtype, s, group, prefer)
    end
  end
  if state and not STATES[state] then index_remove(p, id, jtype, state) end
  redis.call('ZREM', k_jobs(p), zid(id))
  if stored then drop_payloads(p, stored) end
  if streamed then redis.call('DEL', k_stream(p, id)) end
  redis.call('DEL', k_job(p, id), k_log(p, id), k_history(p, id))
  publish(p, id, jtype, 'remove', cjson.encode(jtype))
end

-- Retention (see kue_core/features/retention.py). A policy is "count,age" (ms; an empty part: no bound).
-- The finished job's own (hash field keep_complete or keep_failed) wins over the queue's
-- (<p>:retention, field complete or failed), which wins over RETAIN_COMPLETE / RETAIN_FAILED.
local function retention(p, state, own)
  local text = own
  if not text or text == 'remove' then text = redis.call('HGET', k_retention(p), state) end
  if not text then
    local d = RETAIN_FAILED
    if state == 'complete' then d = RETAIN_COMPLETE end
    return d[1], d[2]
  end
  local count, age = string.match(text, '^(%d*),(%d*)$')
  return tonumber(count), tonumber(age)
end

-- Remove at most `limit` finished jobs of `state` that the retention in force (`own`: the
-- policy of the job that just finished, or nil) no longer keeps: the oldest beyond its count,
-- then, when `ages` is true, those finished longer than its age ago. A member whose job left
-- that state without our scripts (a Node Kue client) is only dropped from the set. Returns
-- how many went. The finishing scripts look at ages for one job id in RETIRE_BATCH only (an
-- age is not a count: a little later is as good, and the sweep also looks); the count holds
-- after every finish.
local function retire(p, state, own, now, limit, ages)
  local count, age = retention(p, state, own)
  local key = k_finished(p, state)
  local doomed = {}
  if count then
    local over = redis.call('ZCARD', key) - count
    if over > 0 then doomed = redis.call('ZRANGE', key, 0, math.min(over, limit) - 1) end
  end
  if age and ages and #doomed < limit then
    local old = redis.call('ZRANGEBYSCORE', key, '-inf', int(now - age), 'LIMIT', #doomed,
      limit - #doomed)
    for _, m in ipairs(old) do doomed[#doomed + 1] = m end
  end
  for _, m in ipairs(doomed) do
    local id = zid_id(m)
    local h = redis.call('HMGET', k_job(p, id), 'type', 'state')
    if h[1] and h[2] == state then
      delete_job(p, id, h[1], state)
    else
      redis.call('ZREM', key, m)
    end
  end
  return #doomed
end


-- Uses     lib/keys
-- Unique keys (see kue_core/jobs/unique.py). A job saved with one has the hash fields `unique`
-- (the key) and `unique_mode`. until_done and debounce keys (<p>:unique:<key>, the holder's
-- id) are released when the job ends (complete, failed for good, cancelled, removed); throttle
-- keys only expire; reuse keys (kue-unique's hash <p>:unique:jobs) go with the job.
local function releases_at_end(mode)
  return mode == 'until_done' or mode == 'debounce'
end

-- Release the key the job `id` holds, if it still holds it (the key may have expired and been
-- taken by another job meanwhile). `key` and `mode` as the hash has them (nil for none).
local function release_unique(p, id, key, mode)
  if key and releases_at_end(mode) then
    local k = k_unique(p, key)
    if redis.call('GET', k) == tostring(id) then redis.call('DEL', k) end
  end
end

-- Read the job's unique key and release it (the ends that do not read the hash themselves).
-- Returns the job's fields {keep_failed =, dependents =} (false when absent).
local function release_unique_of(p, id)
  local u = redis.call('HMGET', k_job(p, id), 'unique', 'unique_mode', 'keep_failed',
    'dependents')
  release_unique(p, id, u[1], u[2])
  return { keep_failed = u[3], dependents = u[4] }
end

-- Dependencies (see kue_core/features/flows.py). A job saved with dependencies has the hash fields
-- `depends` (how many) and `on_dep_fail` (its policy when one fails for good: absent = wait,
-- 'fail', 'ignore'), and <p>:job:<id>:deps, a zset of the ids it depends on: score 0 while it
-- waits for that job, 1 once that job completed (or failed, under 'ignore'). The results of
-- those that completed are in <p>:job:<id>:results (id -> result JSON). A job others depend on
-- has `dependents` = 1 and <p>:job:<id>:dependents (their ids), and is in <p>:awaited (score:
-- when the sweep last looked) until it ends, so that the sweep sees it end when a Node Kue
-- worker ends it. A job saved waiting is in state 'blocked' until it waits for none.


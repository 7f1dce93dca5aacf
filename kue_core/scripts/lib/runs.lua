-- Uses     lib/keys, lib/members, lib/type_rules, lib/pins, lib/events
-- Tell worker process `wid` that its attempt at job `id` under lease `token` was ended by
-- hand (cancelled, moved): it stops the handler at once. The caller has taken the job out of
-- active already, so that worker's reports are refused by the token whatever it does; a
-- worker that misses the message finds the lease lost at its next heartbeat.
local function tell_worker(p, wid, id, token, reason)
  if not wid or wid == '' then return end
  redis.call('PUBLISH', k_control(p, wid),
    cjson.encode({ op = 'end', id = id, lease = token or '', reason = reason }))
end

-- Fan-out jobs (see kue_core/features/runs.py). A job with `fan_out` (k, a hash field) must succeed
-- on k distinct worker processes, each a run: <p>:job:<id>:runs maps a worker id to its run
-- as JSON ({state = running, complete, failed or lost, token, started_at, ended_at, result or
-- error, tries}). A run's token is the job's `lease` counter, bumped at each run's start; its
-- lease is in <p>:run-leases (member <id>@<worker>). From its first run until it ends the job
-- is active (not in <p>:leases) and offers its open places (runs_offer): in the places of each
-- eligible worker of its `only`, or in <p>:open:<type> for a job without workers of its own.
-- The hash also keeps at_once (absent: k), max_failed_runs, late ('1': late joiners join,
-- through <p>:late:<type>), runs_done and runs_failed. Its type's rules have `fanout`.

-- The runs of fan-out job `id`: worker id -> run (a table), and worker id -> its JSON text.
local function runs_of(p, id)
  local flat = redis.call('HGETALL', k_runs(p, id))
  local runs, texts = {}, {}
  for i = 1, #flat, 2 do
    local ok, run = pcall(cjson.decode, flat[i + 1])
    if ok and type(run) == 'table' then
      runs[flat[i]] = run
      texts[flat[i]] = flat[i + 1]
    end
  end
  return runs, texts
end

-- The run of worker `w` of fan-out job `id`, decoded, or nil.
local function run_of(p, id, w)
  local ok, run = pcall(cjson.decode, redis.call('HGET', k_runs(p, id), w) or '')
  if ok and type(run) == 'table' then return run end
  return nil
end

-- Store `run` of worker `w`; `result`: the JSON text of a completed run's result, kept as it
-- is (not decoded and encoded again) at the end of the record, where run_result finds it.
local function run_put(p, id, w, run, result)
  local text = cjson.encode(run)
  if result then text = string.sub(text, 1, -2) .. ',"result":' .. result .. '}' end
  redis.call('HSET', k_runs(p, id), w, text)
end

-- The result JSON text kept in a completed run's record (see run_put), or 'null'.
local function run_result(text)
  local at = string.find(text, ',"result":', 1, true)
  if not at then return 'null' end
  return string.sub(text, at + 10, -2)
end

-- The worker and run of job `id` whose token is `token` and that is running, or nil.
local function run_by_token(p, id, token)
  for w, run in pairs(runs_of(p, id)) do
    if run.state == 'running' and run.token == token then return w, run end
  end
  return nil
end

-- Whether worker `w` may start a run of a job whose runs are `runs`: it has none, or its
-- run failed or was lost.
local function run_eligible(runs, w)
  local run = runs[w]
  return not run or run.state == 'failed' or run.state == 'lost'
end

-- End run `run` of worker `w` as `state` (complete, failed or lost) and drop its lease.
local function run_end(p, id, w, run, state, now, result)
  run.state = state
  run.ended_at = now
  run_put(p, id, w, run, result)
  redis.call('ZREM', k_run_leases(p), id .. '@' .. w)
end

-- Offer the open places of fan-out job `id` to the workers that may take one, and take it
-- out of the places of those that may not: open = min(k - done - running, at_once -
-- running) while the job is active, else none. Wakes the workers it newly offers a place.
-- Returns how many sets it added the job to or took it out of.
local function runs_offer(p, id)
  local h = redis.call('HMGET', k_job(p, id), 'type', 'priority', 'only', 'fan_out', 'at_once',
    'runs_done', 'state')
  local jtype, priority, k = h[1], tonumber(h[2]) or 0, tonumber(h[4]) or 0
  local runs = runs_of(p, id)
  local running = 0
  for _, run in pairs(runs) do
    if run.state == 'running' then running = running + 1 end
  end
  local open = math.min(k - (tonumber(h[6]) or 0), tonumber(h[5]) or k) - running
  if h[7] ~= 'active' then open = 0 end
  local member, changed = zid(id), 0
  if h[3] then
    for _, w in ipairs(pin_list(h[3])) do
      local places = k_places(p, jtype, w)
      if open > 0 and run_eligible(runs, w) then
        if redis.call('ZADD', places, priority, member) == 1 then
          wake_one(k_wake(p, jtype, w))
          changed = changed + 1
        end
      else
        changed = changed + redis.call('ZREM', places, member)
      end
    end
  elseif open > 0 then
    if redis.call('ZADD', k_open(p, jtype), priority, member) == 1 then
      redis.call('LPUSH', k_tokens(p, jtype), 1)  -- wakes an idle slot of the type
      changed = changed + 1
    end
  else
    changed = changed + redis.call('ZREM', k_open(p, jtype), member)
  end
  return changed
end

-- Fan-out job `id` (of `jtype`, workers `only`: its field) ends or leaves its type: it is in
-- no open set, no worker's places and no late set any more.
local function runs_close(p, id, jtype, only)
  local member = zid(id)
  redis.call('ZREM', k_open(p, jtype), member)
  redis.call('ZREM', k_late(p, jtype), member)
  for _, w in ipairs(pin_list(only)) do redis.call('ZREM', k_places(p, jtype, w), member) end
end

-- Stop every running run of fan-out job `id`: it is lost, its lease goes, and its worker is
-- told on its control channel (with the run's token) so that its attempt ends at once.
local function stop_runs(p, id, reason, now)
  for w, run in pairs(runs_of(p, id)) do
    if run.state == 'running' then
      run_end(p, id, w, run, 'lost', now)
      tell_worker(p, w, id, run.token, reason)
    end
  end
end

-- Fan-out job `id` (`job` as load_job gives it) leaves active by hand, or ends otherwise
-- than by its runs: its runs stop, and it offers places no more.
local function runs_leave(p, id, job, reason, now)
  stop_runs(p, id, reason, now)
  runs_close(p, id, job.type, job.only)
end

-- A publish with reset_runs landed on active fan-out job `id` (at `key`; see save_unique):
-- its failed runs are dropped and runs_failed is 0, so that their workers may try again
-- within a fresh max_failed_runs; complete, running and lost runs stay. Its open places are
-- offered again.
local function runs_retry(p, id, key, now)
  local dropped = {}
  for w, run in pairs(runs_of(p, id)) do
    if run.state == 'failed' then dropped[#dropped + 1] = w end
  end
  if #dropped > 0 then redis.call('HDEL', k_runs(p, id), unpack(dropped)) end
  redis.call('HSET', key, 'runs_failed', '0')
  history(p, id, { state = 'active', at = now, reset_runs = #dropped })
  runs_offer(p, id)
end

-- Fan-out job `id` (at `key`, of `jtype` at `priority`) waits again by hand (a move back to
-- inactive, pinned or delayed, a manual retry, a move to another type, a reuse save): it
-- starts over, with no runs, none done and none failed, so that it completes after k new
-- runs. Its targets and k (a fan_out('all') job's resolved `only`) stay; a late-joiners job
-- is in its type's late set again. Its runs were stopped already (runs_leave).
local function runs_reset(p, id, key, jtype, priority)
  redis.call('DEL', k_runs(p, id))
  redis.call('HSET', key, 'runs_done', '0', 'runs_failed', '0')
  if redis.call('HGET', key, 'late') == '1' then
    redis.call('ZADD', k_late(p, jtype), priority, zid(id))
  end
end


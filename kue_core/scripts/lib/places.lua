-- Uses     lib/base, lib/keys, lib/members, lib/pins, lib/events, lib/runs, lib/finishing
-- The score and member of the first of zset `key`, or nil.
local function first_of(key)
  local top = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if not top[1] then return nil end
  return tonumber(top[2]), top[1]
end

-- Whether `worker` should leave its place in fan-out job `id` to others: its run of the job
-- (`run`, or nil) failed, and it would likely fail there again, while another live worker
-- serving `jtype` that the job may run on (its `only`, if any) may start a run of it (see
-- live_targets, run_eligible).
local function leave_place(p, jtype, id, worker, run)
  if not (run and run.state == 'failed') then return false end
  local only = pin_list(redis.call('HGET', k_job(p, id), 'only'))
  local runs = runs_of(p, id)
  for _, w in ipairs(live_targets(p, jtype, #only > 0 and only or nil, now_ms())) do
    if w ~= worker and run_eligible(runs, w) then return true end
  end
  return false
end

-- The best member of zset `key` of fan-out places among its first OPEN_SCAN that `worker`
-- should not leave to others (see leave_place), and its score; or nil. `open`: <p>:open:<type>,
-- where it takes only jobs it may start a run of (see run_eligible).
local function scan_places(p, jtype, worker, key, open)
  local top = redis.call('ZRANGE', key, 0, OPEN_SCAN - 1, 'WITHSCORES')
  for i = 1, #top, 2 do
    local id = zid_id(top[i])
    local run = run_of(p, id, worker)
    if (not open or not run or run.state == 'lost' or run.state == 'failed')
      and not leave_place(p, jtype, id, worker, run) then
      return top[i], tonumber(top[i + 1])
    end
  end
  return nil
end

-- The best job of <p>:open:<type> for `worker`, and its score; or nil (see scan_places).
local function open_top(p, jtype, worker)
  return scan_places(p, jtype, worker, k_open(p, jtype), true)
end

-- The best job of `worker`'s places of `jtype`, and its score; or nil. In a type with fan-out
-- jobs, through scan_places: a pinned fan-out job whose run failed on it waits for its other
-- workers.
local function places_top(p, jtype, worker, r)
  local key = k_places(p, jtype, worker)
  if r.fanout then return scan_places(p, jtype, worker, key, false) end
  local score, member = first_of(key)
  return member, score
end

-- `worker` claims `jtype`: it joins each unfinished late-joiners job of the type among the
-- first LATE_SCAN that it is not a target of (added to `only`, fan_out + 1, a place of its
-- own when the job waits pinned or runs).
local function late_join(p, jtype, worker, now)
  for _, member in ipairs(redis.call('ZRANGE', k_late(p, jtype), 0, LATE_SCAN - 1)) do
    local id = zid_id(member)
    local key = k_job(p, id)
    local h = redis.call('HMGET', key, 'state', 'only', 'fan_out', 'priority', 'type')
    if h[1] == 'complete' or h[1] == 'failed' or not h[1] or h[5] ~= jtype then
      redis.call('ZREM', k_late(p, jtype), member)  -- ended without our scripts
    else
      local only = pin_list(h[2])
      local known = false
      for _, w in ipairs(only) do
        if w == worker then known = true end
      end
      if not known then
        only[#only + 1] = worker
        redis.call('HSET', key, 'only', cjson.encode(only),
          'fan_out', int((tonumber(h[3]) or 0) + 1))
        history(p, id, { state = h[1], at = now, joined = worker })
        if h[1] == 'pinned' then
          redis.call('ZADD', k_places(p, jtype, worker), tonumber(h[4]) or 0, member)
        elseif h[1] == 'active' then
          runs_offer(p, id)
        end
      end
    end
  end
end

-- Start the run of `worker` of fan-out job `id` under `token` (the job's new lease counter):
-- its record (tries counted), its lease, a history entry and the event run start [worker].
local function run_begin(p, id, jtype, worker, token, lease_ms, now)
  local before = run_of(p, id, worker)
  local tries = 1
  if before then tries = (tonumber(before.tries) or 0) + 1 end
  run_put(p, id, worker, { state = 'running', token = token, started_at = now, tries = tries })
  redis.call('ZADD', k_run_leases(p), now + lease_ms, id .. '@' .. worker)
  history(p, id, { state = 'active', at = now, worker = worker, run = true })
  publish(p, id, jtype, 'run start', cjson.encode(worker))
end


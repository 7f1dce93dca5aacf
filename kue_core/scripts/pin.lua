-- pin: change which workers may run a saved job (queue.set_only; see kue_core/features/pins.py).
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] the workers: a JSON list of worker ids (checked by
--          the caller: 1..MAX_PINS ids, no repeats), or '' for any worker
-- Returns  the job's state after the change.
-- Events   pinned [workers or null] for every change; enqueue [type] when a running job goes
--          back to waiting. A waiting job moves between inactive and pinned as it gets
--          workers or loses them, out of its old workers' places and into the new ones'
--          (waking them); a delayed, blocked, complete or failed job changes its field only.
--          A running job whose worker is no longer allowed is stopped as a move by hand
--          stops it (its lease ends here, its worker process is told on
--          <p>:control:<worker id>) and waits pinned for the new workers, no attempt or
--          stall counted; one whose worker stays allowed goes on. A running fan-out job's
--          runs on workers no longer allowed stop (lost, told so), and its open places are
--          offered to the new workers.
-- Uses     lib/base (now_ms, int), lib/keys (k_open, k_places), lib/members (zid),
--          lib/pins (pin_list, waiting, mark_pins), lib/indexes (index_remove, index_add),
--          lib/events (history, publish), lib/attempts (load_job), lib/runs (runs_of, run_end,
--          tell_worker, runs_offer), lib/moves (leave_state)
-- History  {state, at, only = [workers] (absent for any worker), from (when the state changed),
--          stopped = [workers] and reason (when runs or an attempt were stopped)}.
-- Errors   KUE_NOT_FOUND; KUE_INVALID for a malformed list, for fewer workers than a
--          fan-out job's k, for workers given to a job with preferred workers, and for any
--          worker ('') asked of a late-joiners job, whose workers are those that serve its
--          type (nothing is written).
local p, id, given = ARGV[1], ARGV[2], ARGV[3]
local only = nil
if given ~= '' then
  local ok, list = pcall(cjson.decode, given)
  if not ok or type(list) ~= 'table' or #list < 1 or #list > MAX_PINS then
    return redis.error_reply('KUE_INVALID the workers must be a list of 1 to ' .. MAX_PINS
      .. ' worker ids')
  end
  local seen = {}
  for _, w in ipairs(list) do
    if type(w) ~= 'string' or w == '' or seen[w] then
      return redis.error_reply('KUE_INVALID the workers must be distinct worker ids')
    end
    seen[w] = true
  end
  only = cjson.encode(list)
end
local key = KEYS[1]
local job = load_job(key)
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if only and job.prefer then
  return redis.error_reply('KUE_INVALID job ' .. id .. ' has preferred workers: it cannot be '
    .. 'pinned too')
end
if not only and job.fan_out and redis.call('HGET', key, 'late') == '1' then
  return redis.error_reply('KUE_INVALID job ' .. id .. ' runs on every worker of its type, late '
    .. 'joiners too: it keeps a list of workers')
end
local k = tonumber(job.fan_out)
if only and k and k > #pin_list(only) then
  return redis.error_reply('KUE_INVALID job ' .. id .. ' fans out to ' .. k .. ' workers: it '
    .. 'needs at least as many')
end

local now = now_ms()
local allowed = nil  -- worker id -> true; nil: any worker
if only then
  allowed = {}
  for _, w in ipairs(pin_list(only)) do allowed[w] = true end
end
local function set_field()
  if only then
    redis.call('HSET', key, 'only', only, 'updated_at', int(now))
  else
    redis.call('HDEL', key, 'only')
    redis.call('HSET', key, 'updated_at', int(now))
  end
end
local state, stopped = job.state, {}
local reason = 'its workers changed'

if job.state == 'inactive' or job.state == 'pinned' then
  index_remove(p, id, job.type, job.state, job.group, job.prefer)  -- out of the old places
  set_field()
  state = waiting(only)
  redis.call('HSET', key, 'state', state)
  index_add(p, id, job.type, state, job.priority, job.promote_at, job.ttl, now, job.group)
elseif job.state == 'active' and job.fan_out then
  for w, run in pairs(runs_of(p, id)) do
    if run.state == 'running' and allowed and not allowed[w] then
      run_end(p, id, w, run, 'lost', now)
      tell_worker(p, w, id, run.token, reason)
      stopped[#stopped + 1] = w
    end
  end
  -- Out of the old places (runs_offer offers them anew); a late-joiners job stays late.
  redis.call('ZREM', k_open(p, job.type), zid(id))
  for _, w in ipairs(pin_list(job.only)) do
    redis.call('ZREM', k_places(p, job.type, w), zid(id))
  end
  set_field()
  if only then mark_pins(p, job.type) end
  runs_offer(p, id)
elseif job.state == 'active' then
  local holder = redis.call('HGET', key, 'workerId')
  if allowed and not allowed[holder or ''] then
    leave_state(p, id, key, job, reason)
    state = waiting(only)
    set_field()
    redis.call('HSET', key, 'state', state)
    index_add(p, id, job.type, state, job.priority, job.promote_at, job.ttl, now, job.group)
    stopped[1] = holder
  else
    set_field()
  end
else
  set_field()  -- delayed, blocked, complete, failed: they come back through waiting()
end

local entry = { state = state, at = now, only = only and pin_list(only) or nil }
if state ~= job.state then entry.from = job.state end
if #stopped > 0 then
  table.sort(stopped)
  entry.stopped = stopped
  entry.reason = reason
end
history(p, id, entry)
publish(p, id, job.type, 'pinned', only or 'null')
if job.state == 'active' and state ~= 'active' then
  publish(p, id, job.type, 'enqueue', cjson.encode(job.type))
end
return state

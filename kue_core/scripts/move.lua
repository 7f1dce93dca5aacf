-- move: put a job under another type, keeping its id, data, priority and state (qless's
-- requeue); a waiting job waits in the new type's queue.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] new type   ARGV[4] force ('1' or '')
-- Returns  the job's state after the move (unchanged, with nothing written, when the job has
--          that type already).
-- Events   moved [old type] (with the new type as the event's type); enqueue [new type] when
--          it waits inactive. A running job moved with force: its lease ends here (complete
--          and fail are refused by the token), its worker process is told on
--          <p>:control:<worker id> to stop it, and it waits (inactive, or pinned) under the new type; the
--          attempt is not counted. A fan-out job's running runs stop so; unfinished, it starts
--          over (no runs, none done or failed: see lib/runs.lua runs_reset).
-- Errors   KUE_NOT_FOUND; KUE_INVALID_TRANSITION for a running job without force.
-- Uses     lib/base (now_ms, int, STATES), lib/keys (k_types), lib/type_rules (mark_rule),
--          lib/pins (waiting), lib/indexes (index_add), lib/events (history, publish),
--          lib/attempts (load_job, mark_grouped), lib/runs (runs_reset), lib/moves (leave_state),
--          lib/finishing (mark_fanout)
local p, id, to, force = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
if job.type == to then return job.state end
if job.state == 'active' and not force then
  return redis.error_reply('KUE_INVALID_TRANSITION job ' .. id .. ' is running: move it with '
    .. 'force to stop its attempt, or once it has ended')
end
local now = now_ms()
local state = job.state
leave_state(p, id, KEYS[1], job, 'moved to ' .. to)
-- A running job's attempt stops; a suspended job's wait ends (leave_state): both wait again.
if state == 'active' or state == 'suspended' then state = waiting(job.only) end
redis.call('HSET', KEYS[1], 'type', to, 'state', state, 'updated_at', int(now))
redis.call('SADD', k_types(p), to)
if job.fan_out then  -- the new type's claims look at its places; unfinished, it starts over
  mark_fanout(p, to, redis.call('HGET', KEYS[1], 'late') == '1')
  if state ~= 'complete' and state ~= 'failed' then runs_reset(p, id, KEYS[1], to, job.priority) end
end
if STATES[state] then
  if job.group then mark_grouped(p, to) end
  if job.prefer then mark_rule(p, to, 'prefer') end
  index_add(p, id, to, state, job.priority, job.promote_at, job.ttl, now, job.group,
    job.prefer or false)
end
history(p, id, { state = state, at = now, from = job.state, moved = { from = job.type, to = to } })
publish(p, id, to, 'moved', cjson.encode(job.type))
if state == 'inactive' or state == 'pinned' then
  publish(p, id, to, 'enqueue', cjson.encode(to))
end
return state

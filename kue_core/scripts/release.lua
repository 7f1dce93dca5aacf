-- release: give back a job that its worker has not finished, without counting an attempt:
-- its worker shuts down, or its handler was rate limited by the remote side (RateLimited).
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] fencing token
-- ARGV[4]  '' (or absent): the job waits inactive (or pinned) again; ms: rate limited, the job waits
--          delayed that long and the whole type is held back as long (the `until` of its
--          rules in <p>:limits, read by every claim)
-- Returns  1 when the job went back, 0 when it is not active under this token.
--          A fan-out job: its running run under this token is lost, without a stall, and
--          its place opens again (a rate limit's wait is not applied: 1); 0 when no running
--          run has the token.
-- Events   enqueue [type]; rate limited: its due time on <p>:promote.
-- Uses     lib/base (now_ms, int), lib/keys (k_promote), lib/type_rules (rule_of, set_rule),
--          lib/pins (waiting), lib/indexes (index_add), lib/events (history, publish),
--          lib/attempts (leave_active), lib/runs (run_by_token), lib/finishing (run_lost)
local p, id, token = ARGV[1], ARGV[2], ARGV[3]
local wait = tonumber(ARGV[4] or '')
local state, lease, jtype, priority, worker, group, only, fan_out = unpack(
  redis.call('HMGET', KEYS[1], 'state', 'lease', 'type', 'priority', 'workerId', 'group', 'only',
    'fan_out'))
if fan_out then  -- a fan-out job: the run under this token is lost (no stall), its place reopens
  if state ~= 'active' then return 0 end
  local w = run_by_token(p, id, token)
  if not w then return 0 end
  run_lost(p, id, KEYS[1], w, token, false, 0, now_ms())
  return 1
end
if state ~= 'active' or lease ~= token then return 0 end
local now = now_ms()
leave_active(p, id, jtype, group)
if wait and wait > 0 then
  local at = now + wait
  redis.call('HSET', KEYS[1], 'state', 'delayed', 'promote_at', int(at), 'updated_at', int(now))
  index_add(p, id, jtype, 'delayed', tonumber(priority) or 0, at, 0, now, group)
  history(p, id, { state = 'delayed', at = now, from = 'active', worker = worker,
    rate_limited = wait })
  local r = rule_of(p, jtype) or {}
  if not r['until'] or r['until'] < at then
    r['until'] = at
    set_rule(p, jtype, r)
  end
  redis.call('PUBLISH', k_promote(p), int(at))
  return 1
end
state = waiting(only)  -- pinned, for a job with workers of its own
redis.call('HSET', KEYS[1], 'state', state, 'updated_at', int(now))
index_add(p, id, jtype, state, tonumber(priority) or 0, 0, 0, now, group)
history(p, id, { state = state, at = now, from = 'active', worker = worker, released = true })
publish(p, id, jtype, 'enqueue', cjson.encode(jtype))
return 1

-- suspend: a handler raised WaitForSignal: its job leaves active to wait for signal `name`,
-- holding no slot and no lease (see lib/signals.lua); or, when that signal came already,
-- waits for a worker again at once.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] the attempt's fencing token   ARGV[4] the signal's
--          name   ARGV[5] the wait's timeout (ms; '' for none)   ARGV[6] on timeout:
--          'resume' or 'fail'
-- Returns  'suspended'; 'resumed' (the signal was there: the job waits for a worker again);
--          '' when the job is not active under this token (its attempt ended elsewhere).
-- Events   suspended [name]; resumed [name] and enqueue [type]; the wait's deadline on
--          <p>:promote.
-- Errors   KUE_INVALID for a fan-out job (its runs are not suspended).
-- Uses     lib/base (now_ms, int), lib/keys (k_promote), lib/indexes (index_add),
--          lib/events (history, publish), lib/attempts (load_job, leave_active),
--          lib/signals (resume_job)
local p, id, token, name = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local timeout, on_timeout = tonumber(ARGV[5] or ''), ARGV[6]
local lease, worker = unpack(redis.call('HMGET', KEYS[1], 'lease', 'workerId'))
local job = load_job(KEYS[1])
if not job or job.state ~= 'active' or lease ~= token then return '' end
if job.fan_out then
  return redis.error_reply('KUE_INVALID a fan-out job cannot wait for a signal')
end
local now = now_ms()
leave_active(p, id, job.type, job.group)
job.state = 'suspended'
if redis.call('HEXISTS', KEYS[1], 'signal:' .. name) == 1 then
  history(p, id, { state = 'suspended', at = now, from = 'active', worker = worker, signal = name })
  resume_job(p, id, KEYS[1], job, name, 'signal', now)
  return 'resumed'
end
local due = SIGNAL_FOREVER
if timeout then due = now + timeout end
redis.call('HSET', KEYS[1], 'state', 'suspended', 'updated_at', int(now), 'promote_at', int(due),
  'suspended',
  cjson.encode({ name = name, ['until'] = timeout and due or cjson.null,
    on_timeout = on_timeout }))
index_add(p, id, job.type, 'suspended', job.priority, due, 0, now, job.group)
history(p, id, { state = 'suspended', at = now, from = 'active', worker = worker, signal = name,
  ['until'] = timeout and due or nil })
publish(p, id, job.type, 'suspended', cjson.encode(name))
if timeout then redis.call('PUBLISH', k_promote(p), int(due)) end
return 'suspended'

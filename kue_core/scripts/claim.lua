-- claim: give a worker the best inactive job of one type, under a lease.
-- KEYS[1]  <p>:jobs:<type>:inactive
-- ARGV[1]  prefix   ARGV[2] type   ARGV[3] worker id   ARGV[4] lease ms
-- Returns  {id, field, value, ...} of the claimed job's hash, or an empty table when none is
--          waiting (then the type's wake-up tokens, all stale, are cleared), or {'paused'}
--          when the type is paused (see pause.lua; nothing is written).
-- Events   start [type].
-- The job gets state active, started_at, workerId and a new fencing token (its `lease`
-- counter); its lease expires at now + lease ms unless renewed (see heartbeat.lua). The reply
-- also has `waited` (not stored): ms since its last change while waiting (updated_at), which
-- the worker counts in the type's statistics (kue_core/timings.py).
local p, jtype, worker, lease_ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if not lease_ms or lease_ms <= 0 or worker == '' then
  return redis.error_reply('KUE_INVALID claim needs a worker id and a positive lease')
end
return claim(p, jtype, worker, lease_ms, now_ms()) or {}

-- claim: give a worker the best inactive job of one type (or of the first of several types
-- that has one), under a lease.
-- KEYS[1]  <p>:jobs:<type>:inactive (of the first type)
-- ARGV[1]  prefix   ARGV[2] worker id   ARGV[3] lease ms   ARGV[4..] the types, in the order
--          to try them
-- Returns  {field, value, ..., id}: the claimed job's hash, then its id (last, where putting
--          it costs nothing; first, every field would be moved). With one type and no job: an
--          empty table when none is waiting (then the type's wake-up tokens, all stale, are
--          cleared), {'paused'} when the type is paused (see pause.lua), {'limited', ms} when
--          its limits hold it back (see kue_core/features/limits.py); nothing is written then. With
--          several types and no job: {'wait', s1, s2, ...}, per type '', 'paused' or ms.
-- Events   start [type].
-- Uses     lib/base (now_ms), lib/claims (claim_first)
-- The job gets state active, started_at, workerId and a new fencing token (its `lease`
-- counter); it is held by the worker process's lease, which the worker's heartbeat renews
-- (see heartbeat.lua): nothing about leases is written here (lease ms is for a fan-out job's
-- run, which has a lease of its own in <p>:run-leases). The reply also has `waited` (not
-- stored), an integer where the fields are text: ms since its last change while waiting
-- (updated_at), which the worker counts in the type's statistics
-- (kue_core/features/timings.py).
local p, worker, lease_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
if not lease_ms or lease_ms <= 0 or worker == '' or #ARGV < 4 then
  return redis.error_reply('KUE_INVALID claim needs a worker id, a positive lease and a type')
end
return claim_first(p, 4, worker, lease_ms, now_ms()) or {}

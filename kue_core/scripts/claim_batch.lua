-- claim_batch: give a worker up to n of the best inactive jobs of one type (or of several,
-- tried in order), in one call: the jobs n successive claims would give. Each is held by the
-- worker's process lease (see heartbeat.lua) and fenced by its token.
-- KEYS[1]  <p>:jobs:<type>:inactive (of the first type)
-- ARGV[1]  prefix   ARGV[2] worker id   ARGV[3] lease ms   ARGV[4] n (at least 1)
--          ARGV[5..] the types, in the order to try them
-- Returns  {job, job, ..., why}: each job {field, value, ..., id} as claim.lua gives it (its
--          hash, `lease` its fencing token, and `waited`); `why` when fewer than n were
--          claimed is what claim.lua would then give with no job (nil when none is waiting,
--          {'paused'}, {'pins'}, {'limited', ms}, or with several types {'wait', ...}), and
--          nil when n were.
-- Events   start [type], per job.
-- Uses     lib/base (now_ms), lib/events (events_coming), lib/claims (claim_up_to)
-- The clock and each type's rules are read once for the call. The jobs of a type with no
-- rules are popped together and their index writes go in one command each (see claim_plain).
local p, worker, lease_ms, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if not lease_ms or lease_ms <= 0 or worker == '' or #ARGV < 5 or not n or n < 1
    or n % 1 ~= 0 then
  return redis.error_reply('KUE_INVALID claim_batch needs a worker id, a positive lease, n of '
    .. 'at least 1 and a type')
end
events_coming(n)  -- a start per job claimed
local got, why = claim_up_to(p, 5, worker, lease_ms, now_ms(), n)
got[#got + 1] = why or false  -- last: no table shifted (a nil in the reply)
return got

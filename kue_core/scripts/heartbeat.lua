-- heartbeat: a worker process renews the leases of the jobs it runs and registers itself.
-- KEYS[1]  <p>:leases
-- ARGV[1]  prefix   ARGV[2] worker id   ARGV[3] lease ms
-- ARGV[4]  worker description (JSON object: host, pid, types, ...), kept for 3 leases (the
--          jobs a worker runs are not kept here: Queue.workers() reads them from the leases)
-- ARGV[5]  number of jobs n; then n pairs: job id, fencing token
-- Returns  the pairs (job id, token) of the leases lost (the job was recovered, cancelled,
--          moved by hand or removed), one after another: the worker must drop their results.
--          (The token tells two attempts at one job apart: an old one and a new claim.)
-- Events   none.
local p, wid, lease_ms, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5])
if not lease_ms or lease_ms <= 0 or not n or #ARGV ~= 5 + 2 * n then
  return redis.error_reply('KUE_INVALID heartbeat arguments are malformed')
end
local now = now_ms()
local lost = {}
for i = 0, n - 1 do
  local id, token = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
  local h = redis.call('HMGET', k_job(p, id), 'state', 'lease')
  if h[1] == 'active' and h[2] == token then
    redis.call('ZADD', KEYS[1], 'XX', now + lease_ms, zid(id))
  else
    lost[#lost + 1] = id
    lost[#lost + 1] = token
  end
end
local key = k_worker(p, wid)
redis.call('HSET', key, 'info', ARGV[4], 'heartbeat', int(now))
redis.call('PEXPIRE', key, 3 * lease_ms)
redis.call('ZADD', k_workers(p), now, wid)
redis.call('ZREMRANGEBYSCORE', k_workers(p), '-inf', now - 3 * lease_ms)
return lost

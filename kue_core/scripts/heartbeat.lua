-- heartbeat: a worker process registers under its worker id and renews its process's lease,
-- which holds every job it runs; or leaves. One live process at a time holds an id (see
-- kue_core/worker/identity.py).
-- KEYS[1]  <p>:leases (routes the call: every key shares the prefix's hash tag)
-- ARGV[1]  prefix   ARGV[2] worker id   ARGV[3] instance (tells two processes with one id apart)
-- ARGV[4]  mode:
--          start  register, unless another instance holds the id and renewed it within its
--                 lease (that process is live)
--          force  register whoever holds the id (the caller found its holder dead)
--          beat   register (again, if the registration expired) and renew the lease, unless
--                 another instance holds the id: it took it over while this one was silent
--          leave  remove the registration and end the lease now, unless another instance holds
--                 the id
-- ARGV[5]  lease ms of this process
-- ARGV[6]  worker description (JSON object: host, pid, types, ...), kept for 3 leases in
--          <p>:worker:<id> with the fields heartbeat, instance, lease_ms (the jobs a worker runs
--          are not kept here: Queue.workers() reads them from the active jobs' workerId)
-- ARGV[7]  number of jobs n; then n pairs: job id, fencing token
-- The lease: <p>:worker-leases, member worker id, score now + lease ms. A job is held by its
-- `workerId`'s lease and fenced by its token (`lease`); nothing is written per job. When the
-- lease had expired (a process held up past it: SIGSTOP, a long pause), or when start or force
-- takes the id over from another instance, or registers it again after a process under it
-- left (a process before this one may have left jobs), the jobs of the id that
-- started before then are handed to recover.lua (<p>:recovering, field worker id, value
-- '<expiry>:<cursor>'), and a beat reports them lost while they are being recovered; the jobs
-- this process claimed after its expiry are not touched, and the lease goes on.
-- Returns  {'ok', pairs...}: registered (or left); the pairs (job id, token) lost (the job was
--          recovered, or is being recovered, or cancelled, moved by hand or removed), one
--          after another: the worker must drop their results. (The token tells two attempts
--          at one job apart.) A fan-out job's pair renews the lease of this worker's run when
--          it runs under that token (<p>:run-leases), and is lost otherwise.
--          {'taken', info JSON, heartbeat ms, lease ms, now ms, instance}: another instance
--          holds the id (lease ms 0: its registration has none); nothing was written.
-- Events   none.
-- Uses     lib/base (now_ms, int), lib/keys (k_worker, k_workers, k_job, k_run_leases,
--          k_worker_leases, k_recovering), lib/runs (run_of)
local p, wid, me, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local lease_ms, n = tonumber(ARGV[5]), tonumber(ARGV[7])
local MODES = { start = true, force = true, beat = true, leave = true }
if not MODES[mode] or not lease_ms or lease_ms <= 0 or not n or #ARGV ~= 7 + 2 * n then
  return redis.error_reply('KUE_INVALID heartbeat arguments are malformed')
end
local now = now_ms()
local key = k_worker(p, wid)
local mine = false  -- this instance holds the registration already
if redis.call('EXISTS', key) == 1 then
  local h = redis.call('HMGET', key, 'instance', 'heartbeat', 'lease_ms', 'info')
  mine = h[1] == me
  if mode ~= 'force' and not mine then
    local beat, theirs = tonumber(h[2]) or 0, tonumber(h[3])
    -- A registration without lease_ms counts as live until it expires.
    if mode ~= 'start' or not theirs or beat + theirs > now then
      return { 'taken', h[4] or '{}', int(beat), int(theirs or 0), int(now), h[1] or '' }
    end
  end
end
local leases, recovering = k_worker_leases(p), k_recovering(p)
if mode == 'leave' then
  redis.call('DEL', key)
  redis.call('ZREM', k_workers(p), wid)
  -- Its lease ends now, not gone: a job it still held (a release that did not reach Redis)
  -- is recovered like a dead worker's; recover.lua then drops the entry.
  redis.call('ZADD', leases, 'XX', now, wid)
  return { 'ok' }
end
-- The jobs of this id that started at or before `expiry` go to recover.lua (a later expiry
-- than the one being recovered starts the scan again: it finds the earlier ones too).
local function hand_over(expiry)
  local was = redis.call('HGET', recovering, wid)
  local at = was and tonumber(string.match(was, '^(%d+)'))
  if not at or at < expiry then
    redis.call('HSET', recovering, wid, int(expiry) .. ':0')
    return expiry
  end
  return at
end
local held = tonumber(redis.call('ZSCORE', leases, wid))
local lost_before = -1  -- the jobs of this id that started at or before it are lost
if mode ~= 'beat' then
  -- The jobs of a process before this one: none of this one's, which claims after now.
  if held and not mine then lost_before = hand_over(math.min(held, now - 1)) end
elseif held and held <= now then
  lost_before = hand_over(held)
else
  local was = redis.call('HGET', recovering, wid)
  if was then lost_before = tonumber(string.match(was, '^(%d+)')) or -1 end
end
local reply = { 'ok' }
for i = 0, n - 1 do
  local id, token = ARGV[8 + 2 * i], ARGV[9 + 2 * i]
  local state, lease, fan_out, started = unpack(redis.call('HMGET', k_job(p, id), 'state',
    'lease', 'fan_out', 'started_at'))
  local run = nil
  if fan_out and state == 'active' then  -- a fan-out job: this worker's run under this token
    local found = run_of(p, id, wid)
    if found and found.state == 'running' and found.token == token then
      run = found
    end
  end
  if run then
    redis.call('ZADD', k_run_leases(p), 'XX', now + lease_ms, id .. '@' .. wid)
  elseif fan_out or state ~= 'active' or lease ~= token
      or (tonumber(started) or 0) <= lost_before then
    reply[#reply + 1] = id
    reply[#reply + 1] = token
  end
end
redis.call('HSET', key, 'info', ARGV[6], 'heartbeat', int(now), 'instance', me,
  'lease_ms', int(lease_ms))
redis.call('PEXPIRE', key, 3 * lease_ms)
redis.call('ZADD', leases, now + lease_ms, wid)
redis.call('ZADD', k_workers(p), now, wid)
redis.call('ZREMRANGEBYSCORE', k_workers(p), '-inf', now - 3 * lease_ms)
return reply

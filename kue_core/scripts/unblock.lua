-- unblock: the maintenance sweep of dependencies (see kue_core/features/flows.py). Our scripts release
-- a job's dependents as it ends; a job that a Node Kue worker completes or fails (Kue's own
-- code) is found here, in <p>:awaited, and its dependents follow as if our scripts had ended it.
-- KEYS[1]  <p>:awaited (member zid of a job others wait for, score = when last looked at)
-- ARGV[1]  prefix   ARGV[2] most jobs to look at (those looked at longest ago first)
-- Returns  how many of them had ended (complete, failed or removed).
-- Events   as complete.lua and fail.lua give the dependents (unblocked, enqueue, failed...).
-- Errors   KUE_INVALID for a malformed limit.
-- Uses     lib/base (now_ms), lib/members (zid_id), lib/deps (awaited_ended)
-- A job removed without our scripts counts as failed for its dependents.
local p, limit = ARGV[1], tonumber(ARGV[2])
if not limit or limit < 1 then return redis.error_reply('KUE_INVALID unblock takes a limit') end
local now = now_ms()
local ended = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, limit - 1)) do
  if awaited_ended(p, zid_id(m), now) then
    ended = ended + 1
  else
    redis.call('ZADD', KEYS[1], 'XX', now, m)
  end
end
return ended

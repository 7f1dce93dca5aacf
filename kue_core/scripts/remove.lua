-- remove: delete a job, its log and history, and every index entry (Kue's Job#remove).
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id
-- Returns  1.
-- Events   remove [type].
-- Errors   KUE_NOT_FOUND.
-- The job is removed from the sets of every state, not only its own, so a job left in two
-- sets by an interrupted Kue client is cleaned up too. Wake-up tokens are left, as in Kue:
-- a worker that wakes for a removed job finds nothing and waits again.
local p, id = ARGV[1], ARGV[2]
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
delete_job(p, id, job.type, job.state)
return 1

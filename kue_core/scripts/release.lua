-- release: a worker that shuts down gives back a job it has not finished.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] fencing token
-- Returns  1 when the job went back to inactive, 0 when it is not active under this token.
-- Events   enqueue [type].
-- The attempt is not counted: the job did not fail, its worker stopped.
local p, id, token = ARGV[1], ARGV[2], ARGV[3]
local h = redis.call('HMGET', KEYS[1], 'state', 'lease', 'type', 'priority', 'workerId')
if h[1] ~= 'active' or h[2] ~= token then return 0 end
local now = now_ms()
leave_active(p, id, h[3])
redis.call('HSET', KEYS[1], 'state', 'inactive', 'updated_at', int(now))
index_add(p, id, h[3], 'inactive', tonumber(h[4]) or 0, 0, 0, now)
history(p, id, { state = 'inactive', at = now, from = 'active', worker = h[5], released = true })
publish(p, id, h[3], 'enqueue', cjson.encode(h[3]))
return 1

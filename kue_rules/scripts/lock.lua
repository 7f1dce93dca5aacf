-- lock: one process runs a watcher at a time (see kue_rules/store.py).
-- KEYS[1]  <p>:rules:lock:<input>
-- ARGV[1]  token (the process)   ARGV[2] lease ms   ARGV[3] 'take', 'renew' or 'drop'
-- Returns  1 when the lock is ours after the call ('take': taken or renewed; 'renew':
--          renewed; 'drop': deleted), else 0 (another token holds it; nothing written).
local token, ms, mode = ARGV[1], ARGV[2], ARGV[3]
local holder = redis.call('GET', KEYS[1])
if mode == 'take' and not holder then
  redis.call('SET', KEYS[1], token, 'PX', ms)
  return 1
end
if holder ~= token then return 0 end
if mode == 'drop' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ms)
end
return 1

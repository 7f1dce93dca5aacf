-- retry: put a watcher's failed events back on its input, to be handled again.
-- KEYS[1]  its failed list   KEYS[2] its input list   KEYS[3] <p>:rules:failures
-- ARGV[1]  the watcher (its input list's name)   ARGV[2] at most this many
-- Returns  how many were moved. The oldest failure goes first, so it is handled first;
--          their reasons are forgotten.
local moved = 0
local n = tonumber(ARGV[2])
while moved < n do
  local event = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not event then break end
  redis.call('HDEL', KEYS[3], ARGV[1] .. '\n' .. event)
  moved = moved + 1
end
return moved

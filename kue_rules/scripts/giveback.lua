-- giveback: a process that lost a watcher's lock puts the event it was handling back at the
-- head of the input, for the process now running the watcher.
-- KEYS[1]  the taken list   KEYS[2] the input list
-- ARGV[1]  the event
-- Returns  1 when it was in the taken list and went back, 0 when it was not there (the new
--          holder replayed it already).
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  return 1
end
return 0

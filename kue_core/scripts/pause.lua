-- pause: stop workers from claiming jobs of one type (running jobs finish; saves go on).
-- KEYS[1]  <p>:paused
-- ARGV[1]  prefix   ARGV[2] type
-- Returns  1 when the type was not paused before, else 0.
-- Events   none (not a job event; read the set of paused types).
-- Slots that find their type paused wait on <p>:<type>:resumed, emptied here.
local p, jtype = ARGV[1], ARGV[2]
if redis.call('SADD', KEYS[1], jtype) == 0 then return 0 end
redis.call('DEL', k_resumed(p, jtype))
return 1

-- pause: stop workers from claiming jobs of one type (running jobs finish; saves go on).
-- KEYS[1]  <p>:paused
-- ARGV[1]  prefix   ARGV[2] type
-- Returns  1 when the type was not paused before, else 0.
-- Events   none (not a job event; read the set of paused types).
-- Uses     lib/keys (k_resumed), lib/type_rules (rule_of, set_rule)
-- The claim reads the `paused` flag of the type's rules in <p>:limits (one read for paused
-- and limits); <p>:paused lists the paused types. A type in the set without the flag (paused
-- before the flag existed) gets it here too. Slots that find their type paused wait on
-- <p>:<type>:resumed, emptied here.
local p, jtype = ARGV[1], ARGV[2]
local added = redis.call('SADD', KEYS[1], jtype)
local r = rule_of(p, jtype) or {}
if not r.paused then
  r.paused = true
  set_rule(p, jtype, r)
end
if added == 0 then return 0 end
redis.call('DEL', k_resumed(p, jtype))
return 1

-- resume: let workers claim jobs of a paused type again.
-- KEYS[1]  <p>:paused
-- ARGV[1]  prefix   ARGV[2] type
-- Returns  1 when the type was paused, else 0.
-- Events   none (not a job event; read the set of paused types).
-- Uses     lib/keys (k_resumed), lib/type_rules (rule_of, set_rule)
-- Clears the `paused` flag of the type's rules (see pause.lua) and wakes the slots waiting on
-- <p>:<type>:resumed; the list lives RESUMED_SIGNAL_MS (longer than their waits).
local p, jtype = ARGV[1], ARGV[2]
local removed = redis.call('SREM', KEYS[1], jtype)
local r = rule_of(p, jtype)
if r and r.paused then
  r.paused = nil
  set_rule(p, jtype, r)
end
if removed == 0 then return 0 end
redis.call('LPUSH', k_resumed(p, jtype), 1)
redis.call('PEXPIRE', k_resumed(p, jtype), RESUMED_SIGNAL_MS)
return 1

-- limit: set or remove the limits of one type (see kue_core/features/limits.py).
-- KEYS[1]  <p>:limits
-- ARGV[1]  prefix   ARGV[2] type
-- ARGV[3]  JSON object of the limits to change: rate and group_rate ({max, per ms}),
--          concurrency and group_concurrency (n); false removes one; absent ones are kept
-- ARGV[4]  '1': also end a hold of the whole type asked by a handler (RateLimited)
-- Returns  the type's rules after the change (JSON; '{}' for none).
-- Events   none; the slots waiting under the old limits are woken (<p>:<type>:limited) to
--          claim under the new ones.
-- Errors   KUE_INVALID when ARGV[3] is not a JSON object (nothing is written).
-- Uses     lib/keys (k_limited), lib/type_rules (rule_of, set_rule)
local p, jtype = ARGV[1], ARGV[2]
local ok, changes = pcall(cjson.decode, ARGV[3])
if not ok or type(changes) ~= 'table' then
  return redis.error_reply('KUE_INVALID limits must be a JSON object')
end
local r = rule_of(p, jtype) or {}
for _, name in ipairs({ 'rate', 'concurrency', 'group_rate', 'group_concurrency' }) do
  local v = changes[name]
  if v == false then
    r[name] = nil
  elseif v ~= nil then
    r[name] = v
  end
end
if ARGV[4] == '1' then r['until'] = nil end
set_rule(p, jtype, r)
local wake = k_limited(p, jtype)
for _ = 1, LIMIT_WAKE_MAX do redis.call('LPUSH', wake, 1) end
redis.call('LTRIM', wake, 0, LIMIT_WAKE_MAX - 1)
redis.call('PEXPIRE', wake, LIMIT_RECHECK_MS)  -- for the slots waiting now, not later
return cjson.encode(r)

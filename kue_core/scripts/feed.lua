-- feed: start or stop the feed of one job event of a type (see kue_core/features/feeds.py).
-- KEYS[1]  <p>:limits
-- ARGV[1]  prefix   ARGV[2] type   ARGV[3] event (one of FEED_EVENTS)
-- ARGV[4]  '1': start (the type's jobs that have the event from now on go, as
--          "<type>/<id>", to <p>:feed:<event>:<type>); '': stop, and delete that list
-- Returns  1
-- Events   none
-- Errors   KUE_INVALID for an event no feed carries (nothing is written).
-- Uses     lib/keys (k_feed), lib/type_rules (FEED_EVENTS, rule_of, set_rule)
local p, jtype, event = ARGV[1], ARGV[2], ARGV[3]
if not FEED_EVENTS[event] then
  return redis.error_reply('KUE_INVALID no feed carries the event ' .. event)
end
local r = rule_of(p, jtype) or {}
local feeds = r.feeds or {}
if ARGV[4] == '1' then
  feeds[event] = true
else
  feeds[event] = nil
  redis.call('DEL', k_feed(p, event, jtype))
end
if next(feeds) == nil then feeds = nil end
r.feeds = feeds
set_rule(p, jtype, r)
return 1

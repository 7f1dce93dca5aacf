-- tag: add or remove tags of a job, or track or untrack it (see kue_core/features/records.py).
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] what: tag, untag, track or untrack
-- ARGV[4..] for tag and untag: tag, its search words (space separated), tag, its words...
-- Returns  the job's tags after the change (JSON list) for tag and untag; 1 when track or
--          untrack changed something, else 0.
-- Events   none.
-- Errors   KUE_NOT_FOUND; KUE_INVALID for malformed arguments, or past MAX_TAGS tags (nothing
--          is written).
-- Uses     lib/base (now_ms), lib/keys (k_tracked), lib/members (zid), lib/records (json_list,
--          job_words, index_tag, split_words, index_words)
local p, id, what = ARGV[1], ARGV[2], ARGV[3]
if not redis.call('HGET', KEYS[1], 'type') then return redis.error_reply('KUE_NOT_FOUND ' .. id) end
local now = now_ms()
if what == 'track' or what == 'untrack' then
  if #ARGV ~= 3 then return redis.error_reply('KUE_INVALID track takes no tags') end
  if what == 'track' then
    redis.call('HSET', KEYS[1], 'tracked', 'true')
    return redis.call('ZADD', k_tracked(p), 'NX', now, zid(id))
  end
  redis.call('HDEL', KEYS[1], 'tracked')
  return redis.call('ZREM', k_tracked(p), zid(id))
end
if (what ~= 'tag' and what ~= 'untag') or #ARGV < 5 or #ARGV % 2 ~= 1 then
  return redis.error_reply('KUE_INVALID tag arguments are malformed')
end

local h = redis.call('HMGET', KEYS[1], 'tags', 'tagwords', 'words')
local tags, tagwords = json_list(h[1]), json_list(h[2])
local old = job_words(h[3], h[2])
local at = {}
for i, t in ipairs(tags) do at[t] = i end
for i = 4, #ARGV, 2 do
  local t = ARGV[i]
  if what == 'tag' and not at[t] then
    tags[#tags + 1] = t
    tagwords[#tags] = ARGV[i + 1]
    at[t] = #tags
  elseif what == 'untag' and at[t] then
    tags[at[t]] = false  -- dropped below, keeping the others' order
  end
end
local kept, kept_words = {}, {}
for i, t in ipairs(tags) do
  if t then
    kept[#kept + 1] = t
    kept_words[#kept] = tagwords[i] or ''
  end
end
if #kept > MAX_TAGS then
  return redis.error_reply('KUE_INVALID a job has at most ' .. MAX_TAGS .. ' tags')
end
for i = 4, #ARGV, 2 do
  if what == 'tag' then index_tag(p, id, ARGV[i], now) else index_tag(p, id, ARGV[i], nil) end
end
local new = split_words(h[3], {})
for _, tw in ipairs(kept_words) do split_words(tw, new) end
index_words(p, id, old, new)
if #kept > 0 then
  redis.call('HSET', KEYS[1], 'tags', cjson.encode(kept), 'tagwords', cjson.encode(kept_words))
  return cjson.encode(kept)
end
redis.call('HDEL', KEYS[1], 'tags', 'tagwords')
return '[]'

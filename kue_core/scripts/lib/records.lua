-- Uses     lib/keys, lib/members
-- A JSON list stored by us, or {} when absent or not a list (written by another client).
local function json_list(text)
  if not text then return {} end
  local ok, value = pcall(cjson.decode, text)
  if ok and type(value) == 'table' then return value end
  return {}
end

-- Add the space-separated words of `text` (nil for none) to the set `into`; returns it.
local function split_words(text, into)
  if text then
    for w in string.gmatch(text, '%S+') do into[w] = true end
  end
  return into
end

-- The set of every word a job is found by, from its `words` and `tagwords` fields.
local function job_words(words, tagwords)
  local set = split_words(words, {})
  for _, tw in ipairs(json_list(tagwords)) do split_words(tw, set) end
  return set
end

-- Index job `id` under the words of the set `new`, and no longer under those only in `old`;
-- <p>:words (the words in use, for prefix queries) follows.
local function index_words(p, id, old, new)
  local member = zid(id)
  for w in pairs(new) do
    if not old[w] then
      redis.call('ZADD', k_word(p, w), 0, member)
      redis.call('ZADD', k_words(p), 0, w)
    end
  end
  for w in pairs(old) do
    if not new[w] then
      local key = k_word(p, w)
      redis.call('ZREM', key, member)
      if redis.call('EXISTS', key) == 0 then redis.call('ZREM', k_words(p), w) end
    end
  end
end

-- The data of job `id` (stored at `key`) changed: index it under `words` (its data's words,
-- space separated; nil or '' for none) instead of those it had, keeping its tags' words.
local function reword(p, id, key, words)
  local h = redis.call('HMGET', key, 'words', 'tagwords')
  if (words or '') == (h[1] or '') then return end
  local tagwords = job_words(nil, h[2])
  local old, new = split_words(h[1], {}), split_words(words, {})
  for w in pairs(tagwords) do old[w] = true; new[w] = true end
  index_words(p, id, old, new)
  if words and words ~= '' then
    redis.call('HSET', key, 'words', words)
  else
    redis.call('HDEL', key, 'words')
  end
end

-- Tag job `id` with `tag` (at time `now`), or untag it when `now` is nil; <p>:tags (a zset,
-- tag -> jobs with it) counts.
local function index_tag(p, id, tag, now)
  if now then
    if redis.call('ZADD', k_tag(p, tag), 'NX', now, zid(id)) == 1 then
      redis.call('ZINCRBY', k_tags(p), 1, tag)
    end
  elseif redis.call('ZREM', k_tag(p, tag), zid(id)) == 1 then
    if tonumber(redis.call('ZINCRBY', k_tags(p), -1, tag)) <= 0 then
      redis.call('ZREM', k_tags(p), tag)
    end
  end
end

-- Raises unless `text` is a records object save_records takes (checked before a save writes
-- anything).
local function save_records_ok(text)
  local rec = cjson.decode(text)
  assert(type(rec) == 'table' and (rec.tags == nil or type(rec.tags) == 'table'))
  assert(rec.only == nil or (type(rec.only) == 'table' and #rec.only > 0))
  assert(rec.prefer == nil or (type(rec.prefer) == 'table' and #rec.prefer > 0
    and rec.only == nil and rec.fan_out == nil))
  assert(rec.fan_out == nil or rec.fan_out == 'all'
    or (type(rec.fan_out) == 'number' and rec.fan_out >= 1))
end

-- Write the records a new job is saved with: `rec` is the JSON object records.save_extras
-- makes: words (of its data), tags (tag, its words, ...), keys (searchKeys, JSON), track, kc
-- and kf (its retention policies). (Its group and only, save_job writes.)
local function save_records(p, id, rec, now)
  local fields = {}
  local function put(name, value) fields[#fields + 1] = name; fields[#fields + 1] = value end
  local all = split_words(rec.words, {})
  if rec.words then put('words', rec.words) end
  if rec.tags then
    local tags, tagwords = {}, {}
    for i = 1, #rec.tags, 2 do
      tags[#tags + 1] = rec.tags[i]
      tagwords[#tagwords + 1] = rec.tags[i + 1]
      split_words(rec.tags[i + 1], all)
      index_tag(p, id, rec.tags[i], now)
    end
    put('tags', cjson.encode(tags)); put('tagwords', cjson.encode(tagwords))
  end
  if rec.keys then put('searchKeys', rec.keys) end
  if rec.track then
    put('tracked', 'true')
    redis.call('ZADD', k_tracked(p), now, zid(id))
  end
  if rec.kc then put('keep_complete', rec.kc) end
  if rec.kf then put('keep_failed', rec.kf) end
  if rec.stored then put('payloads', cjson.encode({ data = rec.stored })) end
  index_words(p, id, {}, all)
  if #fields > 0 then redis.call('HSET', k_job(p, id), unpack(fields)) end
end


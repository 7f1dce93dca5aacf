-- Uses     lib/keys
-- The values of a job in the payload store (kue_core/base/payloads.py). Its `payloads` field
-- is {"data": name, "result": name}; a name no job holds any more goes to the trash list
-- <p>:payloads:trash, whose names a worker deletes from the store.

-- The store's name a field's text refers to (a reference: {"kue:stored":"<name>",...}), or
-- false for a value held in Redis. A prefix comparison: what a plain value costs.
local function stored_name(text)
  if string.sub(text, 1, 15) ~= '{"kue:stored":"' then return false end
  local ok, value = pcall(cjson.decode, text)
  return ok and type(value) == 'table' and type(value['kue:stored']) == 'string'
    and value['kue:stored'] or false
end

-- Job `key` holds `name` (false: a value in Redis) as its `field`; the name it held there
-- before goes to the trash.
local function hold_payload(p, key, field, name)
  local text = redis.call('HGET', key, 'payloads')
  if not text and not name then return end
  local ok, held = pcall(cjson.decode, text or '{}')
  if not ok or type(held) ~= 'table' then held = {} end
  local old = held[field]
  if type(old) == 'string' and old ~= name then
    redis.call('RPUSH', k_payload_trash(p), old)
  end
  held[field] = name or nil
  if next(held) then
    redis.call('HSET', key, 'payloads', cjson.encode(held))
  else
    redis.call('HDEL', key, 'payloads')
  end
end

-- Every name a deleted job held (`text`: its payloads field) goes to the trash.
local function drop_payloads(p, text)
  local ok, held = pcall(cjson.decode, text)
  if not ok or type(held) ~= 'table' then return end
  for _, name in pairs(held) do
    if type(name) == 'string' then redis.call('RPUSH', k_payload_trash(p), name) end
  end
end

-- A value written to the store for a write that was refused (a completion whose attempt was
-- over, say): no job holds it, so its name goes to the trash.
local function unheld_payload(p, text)
  local name = stored_name(text)
  if name then redis.call('RPUSH', k_payload_trash(p), name) end
end

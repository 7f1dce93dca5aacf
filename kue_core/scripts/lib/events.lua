-- Uses     lib/keys, lib/type_rules
-- Kue's events go out when someone hears them. The first EVENTS_UNASKED (defaults.py) of a
-- call are sent as they come; at the next, the call asks once whether <p>:events has a
-- subscriber on this server, by name or by pattern (asking costs about what sending three
-- events does), and when none has, sends no more: a call that saves or ends many jobs pays
-- for no message nobody reads (the feeds are written all the same). On Redis Cluster a
-- message reaches the subscribers of every node, and a node counts only its own: there every
-- event goes out, as it does when the asking is refused (an ACL without PUBSUB or INFO). A
-- subscriber on a replica is not counted: kue's clients and Node Kue's subscribe on the
-- primary.
-- Per call (set by lib/fence.lua): the events sent so far (counted from EVENTS_UNASKED when
-- the call said more were coming: see events_coming), or false once nobody hears them.
local events_sent

-- A call that will send `count` events, when that is more than EVENTS_UNASKED, asks at its
-- first event rather than after EVENTS_UNASKED of them: it would ask all the same, and with
-- nobody listening it then sends none (a batch of completions and claims: see
-- complete_batch.lua). Called before the call's first event.
local function events_coming(count)
  if count > EVENTS_UNASKED and events_sent == 0 then events_sent = EVENTS_UNASKED end
end

-- Whether anyone may hear a message on <p>:events (see EVENTS_UNASKED).
local function events_heard(p)
  local subscribers = redis.pcall('PUBSUB', 'NUMSUB', k_events(p))
  if subscribers.err or subscribers[2] > 0 then return true end
  local patterns = redis.pcall('PUBSUB', 'NUMPAT')
  if type(patterns) ~= 'number' or patterns > 0 then return true end
  local cluster = redis.pcall('INFO', 'cluster')
  return type(cluster) ~= 'string' or string.find(cluster, 'cluster_enabled:1', 1, true) ~= nil
end

-- Publish a Kue event: {"id":<id>,"event":"<name>","args":["<name>", ...],"type":"<type>"}
-- (`type` is ours: Kue's listeners ignore it; it lets a stream filter by type).
-- `extra` is the JSON text of the further arguments, comma separated ('' for none).
-- A feed's event (FEED_EVENTS) of a type with that feed also goes, as "<type>/<id>", to the
-- feed's list, where kue rules takes it; the rules were read already by the transitions that
-- end a job (leave_active), so a type without feeds pays nothing more there.
-- `type_json`: the type's JSON text when the caller has it (else made here). The message is
-- made in one concatenation: each string Lua makes costs a few hundred instructions.
local function publish(p, id, jtype, event, extra, type_json)
  local sent = events_sent
  if sent == EVENTS_UNASKED and not events_heard(p) then sent = false end
  if sent then
    local sep = extra ~= '' and ',' or ''
    redis.call('PUBLISH', k_events(p), '{"id":' .. id .. ',"event":"' .. event .. '","args":["'
      .. event .. '"' .. sep .. extra .. '],"type":' .. (type_json or cjson.encode(jtype)) .. '}')
    sent = sent + 1
  end
  events_sent = sent
  if FEED_EVENTS[event] then
    local r = rule_of(p, jtype)
    if r and r.feeds and r.feeds[event] then
      redis.call('LPUSH', k_feed(p, event, jtype), jtype .. '/' .. tostring(id))
    end
  end
end

-- A job saved waiting (inactive, or delayed) has no history key until its first transition:
-- that key would be a third of a waiting job's memory. Its save entry follows from its hash
-- (state delayed when it has a delay, at its creation), and the first entry written puts it
-- first. Node Kue's jobs read the same. kue_core/clients/queue_records.py's history() reads it alike.
-- `created_at` and `delay`: the job's fields (false when absent).
local function saved_entry(created_at, delay)
  if not created_at then return nil end
  local state = (tonumber(delay) or 0) > 0 and 'delayed' or 'inactive'
  return cjson.encode({ state = state, at = tonumber(created_at) })
end

-- The trail: a plain job's claim and completion write no history entry. The claim writes
-- the hash field `trail` ("<started_at>,<attempt>") with its other fields, and the completion
-- adds ",<completed_at>,<duration>,<attempt>": so a job that runs once and completes never
-- has a history key. The entries stand for {state active, at, worker, attempt} and {state
-- complete, at, worker, attempt, duration}, the worker being the job's workerId (which only
-- claims change: a claim that finds a trail writes it out first). Every other entry written
-- writes the trail out ahead of it (see history). kue_core/clients/queue_records.py reads it alike.
local function trail_entries(trail, worker)
  local v = {}
  for x in string.gmatch(trail, '[^,]+') do v[#v + 1] = tonumber(x) end
  if not (v[1] and v[2]) then return {} end  -- not ours
  local out = { cjson.encode({ state = 'active', at = v[1], worker = worker, attempt = v[2] }) }
  if v[5] then
    out[2] = cjson.encode({ state = 'complete', at = v[3], worker = worker, attempt = v[5],
      duration = v[4] })
  end
  return out
end

-- Append `entry` (or nothing, when nil) to the job's transition history, after its trail,
-- keeping the last HISTORY_LENGTH.
local function history(p, id, entry)
  local key, jkey = k_history(p, id), k_job(p, id)
  local h = redis.call('HMGET', jkey, 'trail', 'workerId', 'created_at', 'delay')
  local entries = {}
  if h[1] then
    entries = trail_entries(h[1], h[2])
    redis.call('HDEL', jkey, 'trail')
  end
  if entry then entries[#entries + 1] = cjson.encode(entry) end
  if #entries == 0 then return end
  local n = redis.call('RPUSH', key, unpack(entries))
  if n == #entries then
    local saved = saved_entry(h[3], h[4])
    if saved then n = redis.call('LPUSH', key, saved) end
  end
  if n > HISTORY_LENGTH then
    redis.call('LTRIM', key, -HISTORY_LENGTH, -1)
  end
end

-- Before a change to a waiting job's delay: write its save entry while the hash still tells it.
local function keep_saved(p, id)
  local key = k_history(p, id)
  if redis.call('EXISTS', key) == 0 then
    local h = redis.call('HMGET', k_job(p, id), 'created_at', 'delay')
    local saved = saved_entry(h[1], h[2])
    if saved then redis.call('RPUSH', key, saved) end
  end
end


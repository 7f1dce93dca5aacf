-- reseal: put a job's encrypted values under a newer key (kue keys rotate, see
-- kue_core/features/rotation.py): each replaced only while it still holds what the rotation
-- read, so that a value written meanwhile (a retry's error, an edit) is never overwritten.
-- KEYS[1]  <p>:job:<id>   (it writes <p>:job:<id>:log, :history and :stream too)
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] n: hash fields   ARGV[4] m: log lines   ARGV[5] h:
--          history entries   ARGV[6..] n triples (field, value read, new value), m triples
--          (index in <p>:job:<id>:log, line read, new line), h triples (index in
--          <p>:job:<id>:history, entry read, new entry), then triples (an entry id of
--          <p>:job:<id>:stream, its part `d` read, new part)
-- Returns  how many values were replaced.
-- Events   none (the job's payload is the same; only its key changed).
--          A value in the payload store: the job's payloads field follows (the old name to
--          the trash); a new value not written, since its field changed, to the trash too.
--          A stream has no way to change an entry: one with parts replaced is written anew,
--          each entry under its id (a reader resuming after an id goes on as before), its
--          expiry kept, and the job's `streamed` byte count follows the parts' new sizes.
-- Uses     lib/keys (k_log, k_history, k_stream, k_payload_trash), lib/payloads
--          (stored_name, hold_payload)
local p, id, n, m, h = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local replaced = 0
local at = 6
for _ = 1, n do
  local field, was, now = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  if redis.call('HGET', KEYS[1], field) == was then
    redis.call('HSET', KEYS[1], field, now)
    if stored_name(was) or stored_name(now) then
      hold_payload(p, KEYS[1], field, stored_name(now))
    end
    replaced = replaced + 1
  elseif stored_name(now) then  -- written to the store for a value that changed meanwhile
    redis.call('RPUSH', k_payload_trash(p), stored_name(now))
  end
  at = at + 3
end
local function relist(key, index, was, now)
  if redis.call('LINDEX', key, index) == was then
    redis.call('LSET', key, index, now)
    replaced = replaced + 1
  end
end
for _ = 1, m do
  relist(k_log(p, id), tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2])
  at = at + 3
end
for _ = 1, h do
  relist(k_history(p, id), tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2])
  at = at + 3
end
if at + 2 <= #ARGV then
  local want = {}
  while at + 2 <= #ARGV do
    want[ARGV[at]] = { ARGV[at + 1], ARGV[at + 2] }
    at = at + 3
  end
  local key = k_stream(p, id)
  local entries, grown, changed = redis.call('XRANGE', key, '-', '+'), 0, false
  for _, e in ipairs(entries) do
    local part, fields = want[e[1]], e[2]
    for f = 1, #fields, 2 do
      if part and fields[f] == 'd' and fields[f + 1] == part[1] then
        fields[f + 1] = part[2]
        grown = grown + #part[2] - #part[1]
        replaced = replaced + 1
        changed = true
      end
    end
  end
  if changed then
    local ttl = redis.call('PTTL', key)
    redis.call('DEL', key)
    for _, e in ipairs(entries) do redis.call('XADD', key, e[1], unpack(e[2])) end
    if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
    if redis.call('HEXISTS', KEYS[1], 'streamed') == 1 then
      redis.call('HINCRBY', KEYS[1], 'streamed', grown)
    end
  end
end
return replaced

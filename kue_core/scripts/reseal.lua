-- reseal: put a job's encrypted values under a newer key (kue keys rotate, see
-- kue_core/features/rotation.py): each replaced only while it still holds what the rotation
-- read, so that a value written meanwhile (a retry's error, an edit) is never overwritten.
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] n: hash fields   ARGV[4] m: log lines
-- ARGV[5..] n triples (field, value read, new value), m triples (index in <p>:job:<id>:log,
--          line read, new line), then triples (index in <p>:job:<id>:history, entry read,
--          new entry)
-- Returns  how many values were replaced.
-- Events   none (the job's payload is the same; only its key changed).
--          A value in the payload store: the job's payloads field follows (the old name to
--          the trash); a new value not written, since its field changed, to the trash too.
-- Uses     lib/keys (k_log, k_history, k_payload_trash), lib/payloads (stored_name,
--          hold_payload)
local p, id, n, m = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local replaced = 0
local at = 5
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
while at + 2 <= #ARGV do
  relist(k_history(p, id), tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2])
  at = at + 3
end
return replaced

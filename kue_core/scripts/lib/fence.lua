-- Uses     lib/base, lib/keys, lib/type_rules, lib/events
-- What one call learns, for that call only, forgotten as each call begins. One function that
-- the call's body names, rather than the three values: as a Redis function, a script's body
-- may name at most 60 of the library's locals, and repair.lua's names nearly as many.
local function forget_call()
  rules_read = {}
  ints_made = {}
  events_sent = 0
end
forget_call()
-- Redis Cluster: while this queue's slot migrates to another node, its keys move a batch at a
-- time, and a script that met an already-moved key half-way would stop with its first writes
-- done. So every script first reads a key that never exists: on a migrating slot Redis
-- refuses that read (the key may have moved), the script stops having changed nothing, and
-- the client sends it again once the slot has moved. On a Cluster the prefix carries a hash
-- tag (kue_core/connection.py refuses one without: its keys would be in many slots), so a
-- prefix without one is on a single server, where no slot migrates: no read there (3k of
-- Redis's instructions a call; the plain find first, the cheaper test for most prefixes).
if string.find(ARGV[1], '{', 1, true) and string.find(ARGV[1], '^[^{]*{[^}]+}') then
  redis.call('EXISTS', k_fence(ARGV[1]))
end

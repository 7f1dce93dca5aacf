-- Uses     lib/base, lib/keys, lib/type_rules, lib/events
-- Redis Cluster: while this queue's slot migrates to another node, its keys move a batch at a
-- time, and a script that met an already-moved key half-way would stop with its first writes
-- done. So every script first reads a key that never exists: on a migrating slot Redis
-- refuses that read (the key may have moved), the script stops having changed nothing, and
-- the client sends it again once the slot has moved. Anywhere else this is one cheap EXISTS.
redis.call('EXISTS', k_fence(ARGV[1]))
-- What one call learns, for that call only.
rules_read = {}
ints_made = {}
events_sent = 0

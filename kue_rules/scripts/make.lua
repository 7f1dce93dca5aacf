-- make: the end of one event's handling by kue rules: push the tasks its rules made (each
-- only if its dedupe set did not hold it), or move it to the dead letters; count; forget it.
-- KEYS[1]  the watcher's lock (<p>:rules:lock:<input>)   KEYS[2] its taken list
-- KEYS[3]  <p>:rules:counts   KEYS[4] <p>:rules:failures   KEYS[5] its failed list
-- KEYS[6...] the recent lists (<p>:rules:recent:<watcher>\n<rule>) of the rules named, then
--          the queues and sets the plan names
-- ARGV[1]  lock token   ARGV[2] the event   ARGV[3] the watcher (its input list's name)
-- ARGV[4]  the plan (JSON): "matched" (rule names, in order), "tasks" ([rule, queue, set or
--          false, task] each), "jobs" ({rule: [[id, deduplicated], ...]}: saved already),
--          "prefix" ("<p>:rules:"), "replayed" (true: taken from the taken list at start),
--          "failed" (absent, or
--          {rule, kind ('fetch' or 'make'), reason}: the event goes to the failed list)
--          ARGV[5] events kept per rule (recent)   ARGV[6] tasks kept per recent event
-- Returns  {'done', made...} (per task: 1 pushed, 0 its set held it), or {'lost'} when the
--          lock is no longer held under the token (another process took the watcher over
--          and replays the event): nothing is written.
-- Counters (<p>:rules:counts, field "<watcher>\n<rule>\n<name>", rule '' for the
--          watcher's): events, replayed, unmatched, failed; matched, tasks, jobs,
--          duplicates, fetch_errors, make_errors per rule.
local token, event, w = ARGV[1], ARGV[2], ARGV[3]
if redis.call('GET', KEYS[1]) ~= token then return { 'lost' } end
local plan = cjson.decode(ARGV[4])
local keep, keep_tasks = tonumber(ARGV[5]), tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function count(rule, name, n)
  redis.call('HINCRBY', KEYS[3], w .. '\n' .. rule .. '\n' .. name, n or 1)
end

-- Keep `entry` first among the rule's last `keep` events.
local function remember(rule, entry)
  local key = plan.prefix .. 'recent:' .. w .. '\n' .. rule
  redis.call('LPUSH', key, cjson.encode(entry))
  redis.call('LTRIM', key, 0, keep - 1)
end

count('', 'events')
if plan.replayed then count('', 'replayed') end
local made = { 'done' }
if plan.failed then
  local f = plan.failed
  redis.call('LPUSH', KEYS[5], event)
  redis.call('HSET', KEYS[4], w .. '\n' .. event,
    cjson.encode({ rule = f.rule, kind = f.kind, reason = f.reason, at = now }))
  count('', 'failed')
  count(f.rule, f.kind == 'fetch' and 'fetch_errors' or 'make_errors')
  remember(f.rule, { at = now, event = event, error = f.reason })
else
  if #plan.matched == 0 then count('', 'unmatched') end
  local entries = {}
  for _, rule in ipairs(plan.matched) do
    count(rule, 'matched')
    entries[rule] = { at = now, event = event, tasks = {}, jobs = {}, duplicates = 0, more = 0 }
  end
  for _, task in ipairs(plan.tasks) do
    local rule, queue, set, text = task[1], task[2], task[3], task[4]
    local pushed = 1
    if set then pushed = redis.call('SADD', set, text) end
    local e = entries[rule]
    if pushed == 1 then
      redis.call('LPUSH', queue, text)
      count(rule, 'tasks')
    else
      count(rule, 'duplicates')
      e.duplicates = e.duplicates + 1
    end
    if #e.tasks < keep_tasks then
      table.insert(e.tasks, { queue, text, pushed == 1 })
    else
      e.more = e.more + 1
    end
    table.insert(made, pushed)
  end
  for rule, jobs in pairs(plan.jobs) do
    local e = entries[rule]
    for _, job in ipairs(jobs) do
      if job[2] then
        count(rule, 'duplicates')
        e.duplicates = e.duplicates + 1
      else
        count(rule, 'jobs')
      end
      if #e.jobs < keep_tasks then table.insert(e.jobs, job) else e.more = e.more + 1 end
    end
  end
  for _, rule in ipairs(plan.matched) do remember(rule, entries[rule]) end
end
redis.call('LREM', KEYS[2], 1, event)
return made

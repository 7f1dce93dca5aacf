-- remove: delete a job, its log and history, and every index entry (Kue's Job#remove).
-- KEYS[1]  <p>:job:<id>
-- ARGV[1]  prefix   ARGV[2] id   ARGV[3] cascade: '1' removes the jobs blocked waiting for
--          it too (and so on down), '' refuses when there are any
-- Returns  the ids removed: the job's first, then its dependents' (with cascade).
-- Events   remove [type] for each.
-- Errors   KUE_NOT_FOUND; KUE_HAS_DEPENDENTS <id> <their ids, comma separated> when jobs are
--          blocked waiting for it and cascade is not asked (nothing is removed).
-- Uses     lib/keys (k_job, k_dependents, k_deps), lib/pins (waiting), lib/attempts (load_job),
--          lib/retention (delete_job)
-- The job is removed from the sets of every state, not only its own, so a job left in two
-- sets by an interrupted Kue client is cleaned up too. Wake-up tokens are left, as in Kue:
-- a worker that wakes for a removed job finds nothing and waits again. Jobs that depend on it
-- and no longer wait for it keep its id and result.
local p, id, cascade = ARGV[1], ARGV[2], ARGV[3] == '1'
local job = load_job(KEYS[1])
if not job then return redis.error_reply('KUE_NOT_FOUND ' .. id) end

-- The jobs blocked waiting for job `jid`.
local function waiting(jid)
  local out = {}
  if redis.call('HEXISTS', k_job(p, jid), 'dependents') == 0 then return out end
  for _, did in ipairs(redis.call('SMEMBERS', k_dependents(p, jid))) do
    if redis.call('HGET', k_job(p, did), 'state') == 'blocked'
        and redis.call('ZSCORE', k_deps(p, did), jid) == '0' then
      out[#out + 1] = did
    end
  end
  return out
end

local doomed, seen, i = { id }, { [id] = true }, 1
while i <= #doomed do
  local found = waiting(doomed[i])
  if #found > 0 and not cascade then
    table.sort(found, function(a, b) return tonumber(a) < tonumber(b) end)
    return redis.error_reply('KUE_HAS_DEPENDENTS ' .. id .. ' ' .. table.concat(found, ','))
  end
  for _, did in ipairs(found) do
    if not seen[did] then
      seen[did] = true
      doomed[#doomed + 1] = did
    end
  end
  i = i + 1
end
for i = #doomed, 1, -1 do  -- dependents first: no job is left waiting for a removed one
  local jid = doomed[i]
  local h = redis.call('HMGET', k_job(p, jid), 'type', 'state')
  delete_job(p, jid, h[1], h[2])
end
return doomed

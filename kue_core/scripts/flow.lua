-- flow: store new jobs that depend on other jobs (see kue_core/features/flows.py), all or nothing: a
-- job with dependencies, or a tree of jobs (children before their parent).
-- KEYS[1]  <p>:ids (id counter; every other key is built from the prefix, same slot)
-- ARGV[1]  prefix   ARGV[2] number of jobs n; then per job: the SAVE_WIDTH values save.lua
--          takes, its policy when a dependency fails for good ('' wait, 'fail', 'ignore'), the
--          number m of its dependencies, then m dependencies: a saved job's id, or '#k' for
--          the k-th job of this call (k less than its own place: a job depends only on jobs
--          that exist before it, so no cycle can be made)
-- Returns  {id, state} of each new job, in order (state: inactive, delayed, blocked, or failed
--          when its policy is 'fail' and a dependency had failed already).
-- Events   as save.lua for each job that starts inactive or delayed; a job that waits for a
--          dependency starts blocked and publishes nothing; then, for each dependency failed
--          already, what its policy does (see lib/deps.lua dep_failed).
-- Errors   KUE_INVALID when a value is malformed or a dependency does not exist (nothing is
--          written).
-- Uses     lib/base (now_ms, int), lib/keys (k_job, k_deps, k_dependents, k_results, k_awaited),
--          lib/members (zid), lib/deps (dep_failed), lib/saving (save_row_ok, save_job)
-- A job starts blocked unless every job it depends on is complete. Each dependency gets the
-- new job among its dependents (and is awaited, while it has not ended).
local p = ARGV[1]
local n = tonumber(ARGV[2])
if not n then return redis.error_reply('KUE_INVALID flow expects a number of jobs') end
local POLICIES = { [''] = true, fail = true, ignore = true }

-- Check everything first: row i starts at ARGV[b + 1]; rows[i] = {b, policy, deps}.
local rows, b = {}, 2
for i = 1, n do
  if #ARGV < b + SAVE_WIDTH + 2 or not save_row_ok(b) then
    return redis.error_reply('KUE_INVALID job ' .. i .. ' of the flow is malformed')
  end
  local policy, m = ARGV[b + SAVE_WIDTH + 1], tonumber(ARGV[b + SAVE_WIDTH + 2])
  if not POLICIES[policy] or not m or m < 0 or #ARGV < b + SAVE_WIDTH + 2 + m then
    return redis.error_reply('KUE_INVALID job ' .. i .. ' of the flow is malformed')
  end
  local deps = {}
  for j = 1, m do
    local d = ARGV[b + SAVE_WIDTH + 2 + j]
    local k = tonumber(string.match(d, '^#(%d+)$'))
    if k then
      if k < 1 or k >= i then
        return redis.error_reply('KUE_INVALID job ' .. i .. ' of the flow depends on job #'
          .. k .. ', which is not saved before it')
      end
      deps[j] = { k }
    elseif not string.match(d, '^[1-9]%d*$') or redis.call('EXISTS', k_job(p, d)) == 0 then
      local who = 'the ' .. ARGV[b + 1] .. ' job'
      if n > 1 then who = 'job ' .. i .. ' of the flow (' .. ARGV[b + 1] .. ')' end
      return redis.error_reply('KUE_INVALID ' .. who .. ' depends on job ' .. d
        .. ', which does not exist')
    else
      deps[j] = d
    end
  end
  rows[i] = { b, policy, deps }
  b = b + SAVE_WIDTH + 2 + m
end
if b ~= #ARGV then return redis.error_reply('KUE_INVALID the flow has values left over') end

local now = now_ms()
local ids = {}
for i, row in ipairs(rows) do
  local deps, states, waits = {}, {}, false
  for j, d in ipairs(row[3]) do
    if type(d) == 'table' then d = tostring(ids[d[1]]) end
    deps[j] = d
    states[j] = redis.call('HGET', k_job(p, d), 'state')
    if states[j] ~= 'complete' then waits = true end
  end
  local extra = nil
  if #deps > 0 then
    extra = { 'depends', int(#deps) }
    if row[2] ~= '' then extra[3] = 'on_dep_fail'; extra[4] = row[2] end
  end
  local id = save_job(p, KEYS[1], row[1], now, extra, waits)
  ids[i] = id
  for j, d in ipairs(deps) do
    local done = states[j] == 'complete'
    redis.call('ZADD', k_deps(p, id), done and 1 or 0, d)
    redis.call('SADD', k_dependents(p, d), id)
    redis.call('HSET', k_job(p, d), 'dependents', '1')
    if done then
      redis.call('HSET', k_results(p, id), d, redis.call('HGET', k_job(p, d), 'result') or 'null')
    elseif states[j] ~= 'failed' then
      redis.call('ZADD', k_awaited(p), 'NX', now, zid(d))
    end
  end
  for j, d in ipairs(deps) do  -- dependencies failed already: the policy applies at once
    if states[j] == 'failed' and redis.call('HGET', k_job(p, id), 'state') == 'blocked' then
      dep_failed(p, tostring(id), d, row[2], now, {})  -- a new job: no dependents yet
    end
  end
end
local out = {}
for i, id in ipairs(ids) do out[i] = { id, redis.call('HGET', k_job(p, id), 'state') } end
return out

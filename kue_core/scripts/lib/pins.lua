-- Uses     lib/keys, lib/members, lib/type_rules
-- The worker ids of an `only` field (nil or not a list: none).
local function pin_list(text)
  if not text then return {} end
  local ok, value = pcall(cjson.decode, text)
  if ok and type(value) == 'table' then return value end
  return {}
end

-- A waiting job's state: `pinned` when it has workers of its own (`only`: its field), else
-- `inactive`.
local function waiting(only)
  if only then return 'pinned' end
  return 'inactive'
end

-- Note that `jtype` has jobs in workers' places: its claims look at them from now on.
local function mark_pins(p, jtype)
  if mark_rule(p, jtype, 'pins') then
    -- Its idle slots wait on the type's tokens alone so far: one wakes them to claim again
    -- and learn to wait on their own lists too.
    redis.call('LPUSH', k_tokens(p, jtype), 1)
  end
end

-- Offer pinned job `member` to each of its workers (`only`: its field).
local function pin_add(p, member, jtype, priority, only)
  for _, w in ipairs(pin_list(only)) do
    redis.call('ZADD', k_places(p, jtype, w), priority, member)
    wake_one(k_wake(p, jtype, w))
  end
  mark_pins(p, jtype)
end

-- Re-score pinned job `id` at `priority` in its workers' places (or, given `prefer`, its
-- field, a preferred job waiting inactive in its preferred workers' places).
local function pin_rescore(p, id, jtype, priority, prefer)
  for _, w in ipairs(pin_list(prefer or redis.call('HGET', k_job(p, id), 'only'))) do
    redis.call('ZADD', k_places(p, jtype, w), 'XX', priority, zid(id))
  end
end

-- Preferred workers (see kue_core/features/pins.py). A job saved with `prefer` (hash field: a JSON list
-- of worker ids) may be run by any worker and waits inactive, in Kue's sets; it is also in
-- <p>:places:<type>:<worker> of each preferred worker, so that their claims find it first at
-- equal priority (see pick). Whoever claims it, it leaves them all (claim_member); every way
-- back to inactive puts it back. Its type's rules have `prefer` (and `pins`).


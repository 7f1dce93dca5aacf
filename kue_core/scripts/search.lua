-- search: ids of the jobs that match every term of a query, newest first, a page at a time.
-- KEYS[1]  <p>:words (the words in use)
-- ARGV[1]  prefix   ARGV[2] offset   ARGV[3] count   ARGV[4] most candidates to look at one
--          by one (SEARCH_SCAN)   ARGV[5] state filter ('' = any)   ARGV[6] type filter ('' =
--          any)   ARGV[7] number of terms; then per term: its word, '1' when it stands for
--          every word it begins (the query's last word) else '', the number of types whose
--          names hold it, and those types.
-- Returns  {total, exact, id...}: how many jobs match (exact 1), or how many were found among
--          the first ARGV[4] candidates (exact 0); then the ids of the page.
-- Events   none (the scratch set it writes is gone when it returns).
-- Errors   KUE_INVALID for malformed arguments.
-- Uses     lib/base (STATES), lib/keys (k_word, k_type_state, k_words, k_state, k_job),
--          lib/members (zid_id)
-- A job matches a term when the term's word (or, for a prefix, one of up to
-- SEARCH_PREFIX_WORDS words it begins) indexes it (<p>:words:<word>), or when its type is one
-- of the term's types. The term with the fewest jobs gives the candidates (in a scratch set,
-- deleted before the script returns); terms and filters that are one set are intersected
-- with it in Redis, the others checked candidate by candidate. So a query costs in proportion
-- to the jobs of its rarest term, not to the jobs in the queue; a query of one word alone reads
-- the word's set in place.
local p, offset, count, scan = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local state, jtype, n = ARGV[5], ARGV[6], tonumber(ARGV[7])
if not offset or not count or not scan or not n or n < 1 then
  return redis.error_reply('KUE_INVALID search arguments are malformed')
end
local states = {}
for s in pairs(STATES) do states[#states + 1] = s end
if state ~= '' then states = { state } end

-- Each term: words (the index sets of its words), types (names), keys (words' sets and its
-- types' sets of jobs), size (their jobs, counted with repeats).
local terms = {}
local i = 8
for _ = 1, n do
  local word, prefix, ntypes = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if not word or not ntypes then
    return redis.error_reply('KUE_INVALID search arguments are malformed')
  end
  local term = { words = {}, types = {}, size = 0 }
  local found = { word }
  if prefix == '1' then
    found = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. word, '[' .. word .. '\255', 'LIMIT', 0,
      SEARCH_PREFIX_WORDS)
  end
  for _, w in ipairs(found) do
    local size = redis.call('ZCARD', k_word(p, w))
    if size > 0 then
      term.words[#term.words + 1] = k_word(p, w)
      term.size = term.size + size
    end
  end
  term.keys = { unpack(term.words) }  -- the candidates when it is the rarest: words and types
  for t = 1, ntypes do
    local name = ARGV[i + 2 + t]
    term.types[name] = true
    for _, s in ipairs(states) do
      local key = k_type_state(p, name, s)
      local size = redis.call('ZCARD', key)
      if size > 0 then
        term.keys[#term.keys + 1] = key
        term.size = term.size + size
      end
    end
  end
  if term.size == 0 then return { 0, 1 } end
  terms[#terms + 1] = term
  i = i + 3 + ntypes
end
table.sort(terms, function(a, b) return a.size < b.size end)

-- A query that is one word's set (a type's sets are scored by priority, not by id; no filter):
-- its page is read where it is, whatever its size.
local one = #terms == 1 and #terms[1].keys == 1 and #terms[1].words == 1
if one and state == '' and jtype == '' then
  local key = terms[1].keys[1]
  local out = { redis.call('ZCARD', key), 1 }
  if count > 0 then
    for _, m in ipairs(redis.call('ZREVRANGE', key, offset, offset + count - 1)) do
      out[#out + 1] = zid_id(m)
    end
  end
  return out
end

local scratch = k_words(p) .. ':~search'
-- The candidates: the rarest term's jobs, all of score 0 (so in id order, Kue's zids sorting
-- by length then digits).
local union = { 'ZUNIONSTORE', scratch, #terms[1].keys }
for _, key in ipairs(terms[1].keys) do union[#union + 1] = key end
union[#union + 1] = 'WEIGHTS'
for _ = 1, #terms[1].keys do union[#union + 1] = 0 end
redis.call(unpack(union))
local checks = {}
local function narrow(key)
  redis.call('ZINTERSTORE', scratch, 2, scratch, key, 'WEIGHTS', 1, 0)
end
for t = 2, #terms do
  if #terms[t].words == 1 and next(terms[t].types) == nil then
    narrow(terms[t].words[1])
  else
    checks[#checks + 1] = terms[t]
  end
end
if state ~= '' and jtype ~= '' then
  narrow(k_type_state(p, jtype, state))
elseif state ~= '' then
  narrow(k_state(p, state))
end
local by_type = jtype ~= '' and state == ''

local function matches(member)
  local id = zid_id(member)
  local mytype = nil
  if by_type or #checks > 0 then
    mytype = redis.call('HGET', k_job(p, id), 'type')
    if not mytype or (by_type and mytype ~= jtype) then return false end
  end
  for _, term in ipairs(checks) do
    local hit = term.types[mytype] or false
    for w = 1, #term.words do
      if hit then break end
      hit = redis.call('ZSCORE', term.words[w], member) ~= false
    end
    if not hit then return false end
  end
  return true
end

local out = { 0, 1 }
if #checks == 0 and not by_type then
  out[1] = redis.call('ZCARD', scratch)
  if count > 0 then
    for _, m in ipairs(redis.call('ZREVRANGE', scratch, offset, offset + count - 1)) do
      out[#out + 1] = zid_id(m)
    end
  end
else
  local seen, total = 0, 0
  while seen < scan do
    local batch = redis.call('ZREVRANGE', scratch, seen, math.min(seen + 500, scan) - 1)
    for _, m in ipairs(batch) do
      if matches(m) then
        if total >= offset and total < offset + count then out[#out + 1] = zid_id(m) end
        total = total + 1
      end
    end
    seen = seen + #batch
    if #batch < 500 then break end
  end
  out[1] = total
  if seen >= scan and redis.call('ZCARD', scratch) > scan then out[2] = 0 end
end
redis.call('DEL', scratch)
return out

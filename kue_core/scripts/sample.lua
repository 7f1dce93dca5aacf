-- sample: write one sample of the statistics' history (see kue_core/features/history.py), unless
-- another process wrote one since its caller read the figures it is made of.
-- KEYS[1]  <p>:history:minute (the minute of the last sample written)
-- ARGV[1]  prefix   ARGV[2] what KEYS[1] held when the caller read the figures ('' for nothing)
-- ARGV[3]  the minute of this sample (since the epoch, by the server's clock)
-- ARGV[4]  number of points n; then n quadruples: key, field, point, seconds the key is kept
-- then     number of version changes m; then m quintuples: key, when (ms), the change (JSON),
--          oldest time kept (ms), most changes kept
-- then     the hash of cumulative figures, number of fields k; then k pairs: field, figures
-- Every key given is one of the history's (<p>:history:...).
-- Returns  1: written; 0: another process wrote a sample since (nothing written).
-- Events   none.
-- Errors   KUE_INVALID for malformed arguments (nothing is written).
-- Uses     lib/base (int)
local p, seen, minute = ARGV[1], ARGV[2], tonumber(ARGV[3])
local mine = p .. ':history:'
local function ours(key) return string.sub(key, 1, #mine) == mine end
local n = tonumber(ARGV[4])
if not minute or not n then return redis.error_reply('KUE_INVALID sample arguments are malformed') end
local at_m = 5 + 4 * n
local m = tonumber(ARGV[at_m])
local at_last = at_m + 1 + 5 * (m or 0)
local k = tonumber(ARGV[at_last + 1])
if not m or not k or #ARGV ~= at_last + 1 + 2 * k or not ours(ARGV[at_last]) then
  return redis.error_reply('KUE_INVALID sample arguments are malformed')
end
for i = 0, n - 1 do
  if not ours(ARGV[5 + 4 * i]) or not tonumber(ARGV[8 + 4 * i]) then
    return redis.error_reply('KUE_INVALID sample arguments are malformed')
  end
end
for i = 0, m - 1 do
  local at = at_m + 1 + 5 * i
  if not ours(ARGV[at]) or not tonumber(ARGV[at + 1]) or not tonumber(ARGV[at + 3])
      or not tonumber(ARGV[at + 4]) then
    return redis.error_reply('KUE_INVALID sample arguments are malformed')
  end
end
if (redis.call('GET', KEYS[1]) or '') ~= seen then return 0 end
redis.call('SET', KEYS[1], int(minute))
for i = 0, n - 1 do
  local key = ARGV[5 + 4 * i]
  redis.call('HSET', key, ARGV[6 + 4 * i], ARGV[7 + 4 * i])
  redis.call('EXPIRE', key, tonumber(ARGV[8 + 4 * i]))
end
for i = 0, m - 1 do
  local at = at_m + 1 + 5 * i
  local key = ARGV[at]
  redis.call('ZADD', key, ARGV[at + 1], ARGV[at + 2])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. ARGV[at + 3])
  redis.call('ZREMRANGEBYRANK', key, 0, -tonumber(ARGV[at + 4]) - 1)
end
if k > 0 then
  local last = ARGV[at_last]
  redis.call('DEL', last)
  for i = 0, k - 1 do
    redis.call('HSET', last, ARGV[at_last + 2 + 2 * i], ARGV[at_last + 3 + 2 * i])
  end
end
return 1

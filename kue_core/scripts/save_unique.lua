-- save_unique: store one new job that has a unique key, unless a job holds the key already
-- (see kue_core/jobs/unique.py for the modes, and save_unique in lib/saving.lua).
-- KEYS[1]  <p>:ids
-- ARGV[1]  prefix   ARGV[2..11] the SAVE_WIDTH values of one job, as save.lua takes them
-- ARGV[12] unique key   ARGV[13] mode (until_done, throttle, debounce, reuse)
-- ARGV[14] ttl ms of the key (0 = none; throttle needs one)
-- Returns  {id, outcome, state}: outcome 'saved' (a new job holds the key), 'deduplicated'
--          (the holder's id; nothing written), 'debounced' (the delayed or waiting holder got
--          the new data and due time), 'reused' (kue-unique's mode: the holder got the new
--          data, and waits again if it had finished); state: the job's state now.
-- Events   those of save.lua for a new job; deduplicated [key] from the holder otherwise
--          (with promotion or enqueue events when it moves).
-- Uses     lib/base (now_ms), lib/saving (save_row_ok, unique_ok, save_unique)
-- Fan-out holders: with `reset` = 1 in the records object (job.fan_out(..., reset_runs=True),
--          stored nowhere), a save deduplicated (or reused) onto an active fan-out holder
--          drops its failed runs, sets runs_failed to 0 and offers its open places again
--          (lib/runs.lua runs_retry); its complete and running runs stay. Without it a dedup
--          changes no run. A reuse that makes a finished fan-out holder wait again starts it
--          over: no runs, none done or failed (lib/runs.lua runs_reset).
-- Errors   KUE_INVALID for malformed values (nothing is written).
local key_ttl = tonumber(ARGV[14])
if #ARGV ~= 1 + SAVE_WIDTH + 3 or not save_row_ok(1) or not unique_ok(ARGV[12], ARGV[13], key_ttl)
then
  return redis.error_reply('KUE_INVALID save_unique arguments are malformed')
end
return save_unique(ARGV[1], KEYS[1], 1, ARGV[12], ARGV[13], key_ttl, now_ms(), nil)

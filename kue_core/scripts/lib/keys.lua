-- Uses     no other part
local function k_job(p, id) return p .. ':job:' .. id end
local function k_log(p, id) return p .. ':job:' .. id .. ':log' end
local function k_history(p, id) return p .. ':job:' .. id .. ':history' end
local function k_stream(p, id) return p .. ':job:' .. id .. ':stream' end
local function k_jobs(p) return p .. ':jobs' end
local function k_state(p, state) return p .. ':jobs:' .. state end
local function k_type_state(p, jtype, state) return p .. ':jobs:' .. jtype .. ':' .. state end
local function k_types(p) return p .. ':job:types' end
local function k_tokens(p, jtype) return p .. ':' .. jtype .. ':jobs' end
local function k_events(p) return p .. ':events' end
local function k_leases(p) return p .. ':leases' end
local function k_worker_leases(p) return p .. ':worker-leases' end
local function k_recovering(p) return p .. ':recovering' end
local function k_workers(p) return p .. ':workers' end
local function k_worker(p, wid) return p .. ':worker:' .. wid end
local function k_promote(p) return p .. ':promote' end
local function k_work_time(p) return p .. ':stats:work-time' end
local function k_paused(p) return p .. ':paused' end
local function k_payload_trash(p) return p .. ':payloads:trash' end
local function k_fence(p) return p .. ':fence' end
local function k_resumed(p, jtype) return p .. ':' .. jtype .. ':resumed' end
local function k_totals(p) return p .. ':stats:totals' end
local function k_minute(p, outcome, minute) return p .. ':stats:' .. outcome .. ':' .. minute end
local function k_control(p, wid) return p .. ':control:' .. wid end
local function k_unique(p, key) return p .. ':unique:' .. key end
local function k_unique_jobs(p) return p .. ':unique:jobs' end
local function k_tag(p, tag) return p .. ':tag:' .. tag end
local function k_tags(p) return p .. ':tags' end
local function k_tracked(p) return p .. ':tracked' end
local function k_word(p, word) return p .. ':words:' .. word end
local function k_words(p) return p .. ':words' end
local function k_finished(p, state) return p .. ':finished:' .. state end
local function k_retention(p) return p .. ':retention' end
local function k_deps(p, id) return p .. ':job:' .. id .. ':deps' end
local function k_dependents(p, id) return p .. ':job:' .. id .. ':dependents' end
local function k_results(p, id) return p .. ':job:' .. id .. ':results' end
local function k_awaited(p) return p .. ':awaited' end
local function k_schedules(p) return p .. ':schedules' end
local function k_schedule(p, key) return p .. ':schedule:' .. key end
local function k_limits(p) return p .. ':limits' end
local function k_feed(p, event, jtype) return p .. ':feed:' .. event .. ':' .. jtype end
local function k_rate(p, jtype) return p .. ':rate:' .. jtype end
local function k_limited(p, jtype) return p .. ':' .. jtype .. ':limited' end
local function k_groups(p, jtype) return p .. ':groups:' .. jtype end
local function k_group(p, jtype, g) return p .. ':group:' .. jtype .. ':' .. g end
local function k_group_active(p, jtype, g) return p .. ':group-active:' .. jtype .. ':' .. g end
local function k_group_rate(p, jtype, g) return p .. ':group-rate:' .. jtype .. ':' .. g end
local function k_places(p, jtype, wid) return p .. ':places:' .. jtype .. ':' .. wid end
local function k_wake(p, jtype, wid) return p .. ':wake:' .. jtype .. ':' .. wid end
local function k_runs(p, id) return p .. ':job:' .. id .. ':runs' end
local function k_run_leases(p) return p .. ':run-leases' end
local function k_open(p, jtype) return p .. ':open:' .. jtype end
local function k_late(p, jtype) return p .. ':late:' .. jtype end
-- Some of the key names by name, for a script that uses many: a Redis function may close over
-- at most 60 of its library's locals, and this table is one (repair.lua).
local K = { worker = k_worker, workers = k_workers, tag = k_tag, word = k_word,
  schedule = k_schedule, paused = k_paused, awaited = k_awaited, unique = k_unique,
  results = k_results }

"""Every default of kue_core, in one place, with the reason for its value."""

from __future__ import annotations

#: Key prefix; Kue's default. Use a hash tag (``"{q}"``) to keep every key in one Cluster slot.
PREFIX = "q"

#: Environment variable naming the key prefix when ``Queue(prefix=...)`` is not given (empty:
#: not set); else ``PREFIX``. The ``kue`` command and the HTTP app follow the same rule.
PREFIX_ENV = "KUE_PREFIX"

#: Environment variable naming the Redis URL when ``Queue(redis_url=...)`` is not given.
REDIS_URL_ENV = "KUE_REDIS_URL"
#: Environment variable with the queue's encryption keys when ``Queue(encryption_keys=...)``
#: is not given: ``<key id>:<32 bytes in base64>``, comma-separated, the first the one that
#: encrypts (see :mod:`kue_core.base.sealing`).
ENCRYPTION_KEYS_ENV = "KUE_ENCRYPTION_KEYS"
#: Environment variables of a queue's payload limits and store when ``Queue(max_data_bytes=,
#: payload_store=, max_payload_bytes=)`` do not give them (see :mod:`kue_core.base.payloads`).
MAX_DATA_BYTES_ENV = "KUE_MAX_DATA_BYTES"
PAYLOAD_STORE_ENV = "KUE_PAYLOAD_STORE"
MAX_PAYLOAD_BYTES_ENV = "KUE_MAX_PAYLOAD_BYTES"
#: With a payload store and no ``max_data_bytes``: the largest value kept in Redis. Redis
#: serves values of a few KB at memory speed; past tens of KB a value costs more to copy on
#: every read than a file or an object costs to fetch once.
OFFLOAD_BYTES = 64 * 1024
#: The largest payload a queue with limits takes at all, in its store or not: what a worker
#: holds in memory (its text, then its value) with room to spare.
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
#: Names the trash of payloads to delete gives a sweep at once.
PAYLOAD_SWEEP_BATCH = 100
#: Seconds between a worker's sweeps of that trash: a removed job's payload is deleted
#: within as long.
PAYLOAD_SWEEP_EVERY = 5.0
#: A running job's stream of partial output (job.stream(), kue_core/features/streams.py): the
#: most entries kept and the most bytes of parts kept (past either, the oldest go first, until
#: nine tenths of both are held), and the largest part, in bytes of its JSON.
STREAM_ENTRIES = 10_000
STREAM_BYTES = 8 * 1024 * 1024
STREAM_PART_BYTES = 64 * 1024
#: The most parts one call writes (an async def handler's parts written while a call was away
#: go together; past this, in the next call): 100 parts of 64 KiB are 6.4 MB of arguments.
STREAM_PARTS_PER_CALL = 100
#: The deadline (ms) of a wait for a signal without a timeout: its score in the sets of the
#: suspended state, after every real deadline.
SIGNAL_FOREVER = 2**53 - 1
#: The longest wait for a signal (ms, 365 days), and the longest name and payload of a signal.
SIGNAL_TIMEOUT_MAX = 365 * 86_400_000
SIGNAL_NAME_MAX = 100
#: What a signal's name is made of.
SIGNAL_NAME_RULE = rf"[A-Za-z0-9_.:-]{{1,{SIGNAL_NAME_MAX}}}"
SIGNAL_PAYLOAD_BYTES = 64 * 1024
#: The largest result of a step (job.step(), kue_core/features/steps.py), in bytes of JSON.
STEP_RESULT_BYTES = 1024 * 1024
#: Seconds a reader of a stream waits for a part before it looks whether the job ended.
STREAM_POLL = 1.0
#: The environment variable that picks the worker runtime when ``Queue(runtime=...)`` does not.
RUNTIME_ENV = "KUE_RUNTIME"
#: The worker runtimes: every slot a task on one event loop (the thread runtime, a thread per
#: slot, was removed once the loop was as fast or faster in every case measured).
RUNTIMES = ("loop",)

#: Where the embedded Redis keeps its data when no URL is configured (relative to the cwd).
DATA_DIR = ".kue"

#: File name of the embedded Redis's RDB snapshot inside ``DATA_DIR``.
EMBEDDED_DB_FILE = "kue.rdb"

#: Seconds the embedded server may take to start and load its data before a client gives up.
EMBEDDED_START = 60.0

#: Seconds the embedded server runs with no process connected before its watchdog shuts it
#: down (its owners exited without shutting it down: SIGKILL, a crash). A process that comes
#: back later starts it again.
EMBEDDED_IDLE = 3.0

#: Seconds a worker counts repeats of one Redis error before it logs the count (the first
#: is logged at once): an outage gives a line every so often, not a line a try.
ERROR_REPEAT_WINDOW = 10.0

#: Longest delay, ttl or backoff in milliseconds (about 31,700 years). The scripts add these to
#: the clock, and a Lua number holds integers exactly only below 2**53.
MAX_MS = 10**15

#: Kue's default: one attempt, no retry.
MAX_ATTEMPTS = 1

#: Number of transitions kept per job in ``<prefix>:job:<id>:history``.
HISTORY_LENGTH = 50

#: Characters of an error's text kept in a history entry (the job's ``error`` field keeps it all).
HISTORY_ERROR_LENGTH = 4000

#: Jobs per Lua call in ``save_many``: large enough to amortise the round trip, small enough that
#: one call does not block Redis for long (about a millisecond per thousand jobs).
SAVE_CHUNK = 1000

#: Longest accepted job type name, in characters (type names are part of Redis keys).
MAX_TYPE_LENGTH = 256

#: Seconds to wait for Redis to accept a TCP connection before reporting it unreachable.
CONNECT_TIMEOUT = 5.0

#: Seconds a command may wait for Redis's reply before the connection is given up. Longer than
#: ``IDLE_WAIT``, the longest a worker's blocking wait lasts (redis-py's own default, 5 s, is not).
SOCKET_TIMEOUT = 30.0

#: Milliseconds a save waits for replicas to confirm it (the ``replicas`` URL option) before
#: it is reported as not acknowledged.
REPLICA_TIMEOUT_MS = 2000

#: Seconds a transition keeps resending while Redis Cluster redirects it (the queue's slot is
#: migrating or failing over) before the caller gets a ``ConnectionError``.
REDIRECT_PATIENCE = 10.0

#: Most calls an ``AsyncQueue`` has under way at once, each on a connection of its own (event
#: streams have theirs besides): calls made beyond wait for one to end, so that a thousand
#: concurrent saves share fifty connections rather than open a thousand.
AIO_CONNECTIONS = 50

#: Seconds a started event subscriber may take to confirm its subscription.
SUBSCRIBE_TIMEOUT = 5.0

#: Longest unique key of a job (``job.unique(key)``).
MAX_UNIQUE_KEY = 200

#: Longest reason a job can be cancelled with (it becomes the job's error and a history entry).
MAX_REASON = 1000

#: Longest worker id a process may be given (``Queue(worker_id=...)``, ``kue worker --id``).
MAX_WORKER_ID = 100

#: Seconds a worker process's control listener waits for a message before checking whether it
#: should stop (a message itself is handled as it arrives).
CONTROL_POLL = 0.2

#: Milliseconds a worker process's lease lasts unless renewed; it holds every job the process
#: runs. A worker renews it every third of this; once it expires (the worker died or hung),
#: the jobs it held go back to the queue.
LEASE_MS = 30_000

#: Times a job may lose its worker (lease expired) and be requeued; one more and it fails.
#: BullMQ's default (maxStalledCount 1): a job that kills its worker is not retried forever.
STALL_LIMIT = 1

#: Jobs moved per promotion or recovery call, to keep one script call short.
SWEEP_LIMIT = 1000

#: Jobs moved or removed per call of a bulk action (retry all failed...): each call blocks Redis
#: for a few milliseconds at most, and other clients run between calls.
BULK_BATCH = 500

#: A type's delayed list is ordered by due time from the all-types delayed set (Kue scores a
#: type's sets by priority): up to this many of its jobs are read whole and sorted (about 10 ms
#: for 10,000); a type with more is found by walking the all-types set in due order instead.
DUE_SORT_LIMIT = 10_000

#: Members read a round trip while walking the all-types delayed set for one type's jobs.
DUE_WALK_BATCH = 1000

#: Upper bounds (ms) of the buckets of the job duration histogram (``Queue.totals()``, the
#: Prometheus metrics); the scripts count with this list.
DURATION_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)

#: Longest window of per-minute counts ``Queue.throughput()`` reports: the counters live a day.
THROUGHPUT_MINUTES = 1440

#: Seconds a per-minute counter of completed or failed jobs is kept (as long as
#: ``Queue.throughput()`` may ask for it).
MINUTE_COUNTER_TTL = THROUGHPUT_MINUTES * 60

#: Days the wait and run statistics of each type are kept (``Queue.timings()``), as qless
#: keeps its per-queue statistics: a month of daily figures, about 1 KB per type and day.
TIMINGS_DAYS = 30

#: Seconds a day's wait or run statistics of a type live after their first job (the day, and
#: ``TIMINGS_DAYS`` more).
TIMINGS_TTL = (TIMINGS_DAYS + 1) * 86400

#: Seconds an idle worker blocks on Redis waiting for work before it checks again.
IDLE_WAIT = 5.0

#: Milliseconds the wake-up signal of ``queue.resume(type)`` is kept for paused workers: longer
#: than any of their waits (``IDLE_WAIT``), so each sees it.
RESUMED_SIGNAL_MS = 60_000

#: Kue's job events a script call sends before it asks whether anyone hears ``<p>:events``
#: (``PUBSUB NUMSUB``/``NUMPAT``): when no one does, it sends no more (see ``publish`` in
#: ``scripts/lib/events.lua``). Asking costs about what sending three does, so a call with
#: one or two events (a save, a claim and a completion) never asks.
EVENTS_UNASKED = 4

#: Most wake-ups kept for the slots waiting for a place under a concurrency limit (one is
#: pushed each time a running job of such a type ends; a slot takes one and claims again).
LIMIT_WAKE_MAX = 64

#: Milliseconds a slot held back by a concurrency limit waits before it claims again, unless
#: a place frees first (it is woken then): the bound on a place freed by a job that a client
#: without our scripts ended (Node Kue).
LIMIT_RECHECK_MS = 1000

#: Groups a claim looks at, in their turn, for one that may run a job now (the others are at
#: their group limits); past them the claim reports when to try again.
GROUP_SCAN = 16

#: Most jobs a claim of several (``claim_batch``) pops off a type's set in one command; its
#: index writes then take twice as many arguments, well within what Lua's ``unpack`` takes.
CLAIM_CHUNK = 500

#: Largest max_jobs of a rate and largest concurrency cap (``queue.limit``).
MAX_LIMIT = 10**9

#: Longest window of a rate, and longest hold a handler's ``RateLimited`` asks (30 days, ms).
MAX_LIMIT_MS = 30 * 86_400_000

#: Most groups one ``queue.groups()`` page lists.
MAX_GROUPS_PAGE = 1000

#: How far into a grouped type's queue the turn of its jobs in no group looks for one (they
#: are served in their turn once among the type's next ``LANE_SCAN`` jobs).
LANE_SCAN = 8

#: Longest group name (``job.group(name)``).
MAX_GROUP_LENGTH = 200

#: Longest sleep of the promotion timer when it has heard of no delayed job. kue's own saves
#: of delayed jobs wake it at once; this bounds the lateness of those it is not told of
#: (saved by Node Kue, or while it was reconnecting), as Kue's own one-second timer does.
PROMOTE_MAX_WAIT = 1.0

#: Seconds between two looks of a burst worker (``queue.run(burst=True)``, ``kue worker
#: --burst``) for work left (see :mod:`kue_core.worker.burst`).
BURST_POLL = 0.1
#: Jobs a worker process remembers having failed with a retry to come, for a burst to wait
#: for their retries; past it the oldest are forgotten. A process that never runs a burst
#: keeps them too (a burst may begin after its first failures), so this bounds its memory.
BURST_FOLLOW = 10_000

#: Seconds ``queue.shutdown()`` lets running handlers finish before giving their jobs back.
SHUTDOWN_TIMEOUT = 10.0
#: The longest shutdown waits for the jobs a worker claimed ahead to go back (s); past it,
#: their leases give them back.
STOP_GIVE_BACK = 5.0

#: Seconds a ``def`` handler whose attempt was ended from outside (ttl, lost lease, cancel)
#: gets to return by itself before its slot goes on in a new thread.
STOP_GRACE = 0.1

#: Threads per worker process left running a ``def`` handler that outlived its attempt (past
#: its ttl, lease lost): Python cannot stop a thread, so its slot goes on in a new one. Past
#: this many, a slot whose handler is stuck waits for it to return, so a handler that always
#: hangs cannot grow threads without bound. Use ``isolation="process"`` for such handlers.
ABANDONED_THREADS = 16

#: Seconds a process-isolated handler's child may take to start before its job's ttl counts
#: anyway (the ttl counts from when the child starts the job, not from its own start-up).
CHILD_START_GRACE = 30.0

#: Retry pause after a Redis error in a worker: doubles from the first value up to the second.
RETRY_PAUSE = (0.1, 5.0)

#: ``kue doctor``: an active job with no lease (a Kue Node worker's) whose ``updated_at`` is
#: older than this (and than its ttl) is taken as stuck, its worker gone. Kue updates it when
#: a job starts and at each progress report: set it above the longest a Node handler runs
#: without reporting progress.
DOCTOR_STUCK_AFTER_MS = 3_600_000

#: ``kue doctor``: a job hash without a state or a type that was written this recently is
#: left alone (a Kue client writes a job's fields one command at a time: it may be saving it).
DOCTOR_GRACE_MS = 60_000

#: ``kue doctor``: members and job logs per ``screen`` call, members per ZSCAN step, jobs
#: per ``inspect`` call, actions per ``repair`` call. Each call then blocks Redis for about
#: a millisecond at most.
DOCTOR_BATCH = 200

#: Keys ``kue doctor`` asks Redis to look at per SCAN call when it walks the keyspace (a hint
#: of the work of one call: SCAN only compares key names).
DOCTOR_SCAN_COUNT = 2000

DOCTOR_JOBS_PER_CALL = 50

#: Tags: longest tag (and longest search key name), most tags (and search keys) per job.
MAX_TAG = 100
MAX_TAGS = 32

#: Search index: longest word kept (longer ones are cut), most words indexed per job's data
#: (title and search keys), most index words a prefix (the query's last word) stands for.
SEARCH_WORD = 64
SEARCH_WORDS = 100
SEARCH_PREFIX_WORDS = 100

#: Search index: most candidates one query looks at when a word must be checked job by job (a
#: word that is also in a type name, or a type filter without a state): past this, the total
#: it reports is a lower bound (``Found.exact`` is false).
SEARCH_SCAN = 20_000

#: Complete and failed lists newest first (``Queue.page(by="finished")``): most members one
#: page looks at one by one (a deep page of a type with many jobs among more of other types);
#: past this, the page is cut short rather than block Redis for long.
FINISHED_SCAN = 20_000
#: Members such a page reads per step; a type with at most four steps of jobs has its finish
#: times read whole and sorted, a bigger one walks the finish times in order.
FINISHED_CHUNK = 500

#: Retention of finished jobs when the queue sets none (``queue.set_retention``): the newest
#: 100,000 completed jobs for at most 7 days, failed ones for at most 30 days. A busy queue
#: stays bounded (about 100 MB of Redis at 1 KB per job, whatever the rate) while a person can
#: still look back over a week of successes and a month of failures to debug them.
RETAIN_COMPLETE = (100_000, 7 * 86_400_000)
RETAIN_FAILED = (100_000, 30 * 86_400_000)

#: Finished jobs a finishing script removes at most under retention (each call stays short);
#: the maintenance sweep removes up to ``SWEEP_LIMIT`` a call.
RETIRE_BATCH = 10

#: Seconds between a worker process's retention sweeps (jobs finished by Node Kue workers,
#: ages passing while nothing finishes).
RETENTION_SWEEP = 30.0

#: Seconds between two dependencies sweeps of a worker process, which release the jobs that
#: wait for jobs a Node Kue worker ended (our own scripts release them at once).
DEPS_SWEEP = 1.0

#: Seconds between a worker process's additions of its completions to the counters of work
#: time, throughput and totals (see kue_core.features.tally), and of its jobs' waits and runs
#: to the timings (kue_core.features.timings): how far those may lag behind its jobs.
TALLY_FLUSH = 1.0

#: Schedules (see kue_core.jobs.schedules). After an outage, a schedule with ``catch_up="all"``
#: makes a job for each missed tick, the latest ``CATCH_UP_MAX`` of them; it looks at most at
#: ``CATCH_UP_SCAN`` ticks (a longer outage skips the rest).
CATCH_UP_MAX = 100
CATCH_UP_SCAN = 10_000
#: A tick reached at most this many ms late (and nearer its time than the next tick's) is on
#: time: ``catch_up="none"`` still runs it.
SCHEDULE_GRACE = 1000
#: The shortest interval of an ``every`` schedule, in ms.
SCHEDULE_MIN_INTERVAL = 50

#: The most workers a job may be pinned to (``job.only``): every wait and claim of a pinned
#: job touches each of their places.
MAX_PINS = 64

#: How many of a type's fan-out jobs with an open place for any worker (``<p>:open:<type>``,
#: best first) a claim looks through for one this worker may take (it has no run in it, or
#: its run failed or was lost); one it has already run is skipped, so a few are enough.
OPEN_SCAN = 8

#: How many of a type's unfinished ``fan_out("all", late_joiners=True)`` jobs a claim by a
#: worker not among their targets looks at to join (each claim of a type with any).
LATE_SCAN = 8

#: The audit log (kue_core.features.audit): entries kept at most, and for how long (ms). The
#: count is held roughly (Redis trims a stream by whole nodes of entries), the age exactly.
AUDIT_MAX_ENTRIES = 10_000
AUDIT_MAX_AGE_MS = 30 * 24 * 3600 * 1000

#: The statistics' history (kue_core.features.history): how often a worker's keeper looks
#: whether the minute's sample is due (s); the most changes of versions kept per type.
HISTORY_CHECK = 5.0
HISTORY_DEPLOYS = 500

#: Bulk actions on a filter (kue_core.features.bulk): how long a run's progress is kept (ms),
#: and how long a running one may go without a batch before it reads as interrupted (ms).
BULK_KEEP_MS = 86_400_000
BULK_STALE_MS = 60_000

#: Jobs a step of ``kue keys rotate`` (``Queue.rotate_keys``) reads and re-encrypts at once:
#: one round trip to read them, one to write; an interrupted rotation loses at most a step.
ROTATE_BATCH = 200

"""Every Redis key kue_core uses, spelled once (Kue 0.11's layout plus our additions).

The Lua scripts receive the prefix and build per-job keys with the helpers in
``scripts/lib/keys.lua``, which mirror the functions here; ``tests/scripts/test_layout.py`` keeps
the two in agreement.
"""

from __future__ import annotations

import re

#: Characters that are special in a Redis glob pattern (SCAN MATCH).
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def glob_escape(text: str) -> str:
    """``text`` as a literal inside a Redis glob pattern (``{q}`` stays, ``a*b -> a\\*b``)."""
    return _GLOB_SPECIAL.sub(r"\\\1", text)


def zid(job_id: int) -> str:
    """Kue's zset member for a job: two-digit length, ``|``, the id (``7 -> "01|7"``)."""
    s = str(job_id)
    return f"{len(s):02d}|{s}"


def job_id_from_zid(member: str) -> int:
    """Inverse of :func:`zid` (Kue's ``stripFIFO``)."""
    return int(member[member.index("|") + 1 :])


#: The parts of a job's keys: its hash, log, history, its dependencies' keys, and its runs
#: (a fan-out job's, see kue_core/features/runs.py).
JOB_PARTS = ("", "log", "history", "deps", "dependents", "results", "runs", "stream")


class Keys:
    """Key names under one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.ids = f"{prefix}:ids"
        self.jobs = f"{prefix}:jobs"
        self.types = f"{prefix}:job:types"
        self.work_time = f"{prefix}:stats:work-time"
        self.events = f"{prefix}:events"
        #: zset of the leases of jobs claimed by workers before the lease per process (an
        #: upgrade's leftovers, recovered by ``recover.lua``): member zid, score = expiry (ms).
        self.leases = f"{prefix}:leases"
        #: zset of the worker processes' leases: member worker id, score = lease expiry (ms).
        #: A worker's active jobs (``workerId``) are held under its process's lease.
        self.worker_leases = f"{prefix}:worker-leases"
        #: hash of the workers whose lease expired, their jobs being recovered: field worker
        #: id, value ``<expiry ms>:<cursor>`` (``recover.lua`` scans ``jobs:active``).
        self.recovering = f"{prefix}:recovering"
        #: zset of live worker processes: member worker id, score = last heartbeat (ms).
        self.workers = f"{prefix}:workers"
        #: pub/sub channel: the due time (ms) of a job that became delayed, to wake promoters.
        self.promote = f"{prefix}:promote"
        #: set of the job types whose jobs workers do not claim for now.
        self.paused = f"{prefix}:paused"
        #: never written: on Redis Cluster (a prefix with a hash tag) each script reads it
        #: first, so that it stops before any write while the queue's slot is migrating (see
        #: lib/fence.lua).
        self.fence = f"{prefix}:fence"
        #: hash of counters: ``complete:<type>`` and ``failed:<type>`` (jobs that ended so),
        #: ``le:<ms>`` and ``le:inf`` (completed jobs by duration bucket).
        self.totals = f"{prefix}:stats:totals"
        #: zset of tag -> number of jobs with it (so the most used read first).
        self.tags = f"{prefix}:tags"
        #: zset of tracked jobs: member zid, score = when tracked (ms).
        self.tracked = f"{prefix}:tracked"
        #: zset of the words the search index holds (all of score 0: read by ZRANGEBYLEX).
        self.words = f"{prefix}:words"
        #: hash of the queue's retention policies: ``complete`` and ``failed`` -> "count,age".
        self.retention = f"{prefix}:retention"
        #: hash: where the retention sweep's look for jobs finished by others goes on (ZSCAN
        #: cursors of ``jobs:complete`` and ``jobs:failed``).
        self.finished_cursor = f"{prefix}:finished:cursor"
        #: zset of the jobs others wait for that have not ended: member zid, score = when
        #: the dependencies sweep last looked (it finds those a Node Kue worker ended).
        self.awaited = f"{prefix}:awaited"
        #: zset of the schedules that will make jobs: member key, score = next due time (ms).
        self.schedules = f"{prefix}:schedules"
        #: hash: type -> its rules as JSON (limits, paused flag, groups, feeds; see
        #: kue_core/features/limits.py and kue_core/features/feeds.py).
        self.limits = f"{prefix}:limits"
        #: zset of the runs of fan-out jobs held under a lease: member ``<id>@<worker id>``,
        #: score = lease expiry (ms) (see kue_core/features/runs.py).
        self.run_leases = f"{prefix}:run-leases"
        #: stream of the changes made through the HTTP API and the dashboard, oldest first:
        #: entry id = when (ms), fields of kue_core/features/audit.py (bounded: count, age).
        self.audit = f"{prefix}:audit"
        #: the minute (since the epoch) of the last sample of the statistics' history
        #: (kue_core/features/history.py): the sample of a minute is written once.
        self.series_minute = f"{prefix}:history:minute"
        #: hash: per type (and ``*`` for all), the cumulative figures the last sample read
        #: (JSON), from which the next one takes the difference.
        self.series_last = f"{prefix}:history:last"
        #: hash: per encryption key id, the last job id whose values ``kue keys rotate`` put
        #: under that key (kue_core/features/rotation.py): where a rotation stopped goes on.
        self.rotation = f"{prefix}:keys:rotation"
        #: list of the names of values in the payload store whose jobs were removed or whose
        #: data was replaced (kue_core/base/payloads.py): a worker deletes them from the store.
        self.payload_trash = f"{prefix}:payloads:trash"

    def job(self, job_id: int) -> str:
        return f"{self.prefix}:job:{job_id}"

    def log(self, job_id: int) -> str:
        return f"{self.prefix}:job:{job_id}:log"

    def stream(self, job_id: int) -> str:
        """A Redis stream: the parts of its output a running job streamed (job.stream())."""
        return f"{self.prefix}:job:{job_id}:stream"

    def history(self, job_id: int) -> str:
        return f"{self.prefix}:job:{job_id}:history"

    def deps(self, job_id: int) -> str:
        """zset of the jobs a job depends on: member id, score 0 while it waits for that one,
        1 once done (completed, or failed under the policy ``ignore``)."""
        return f"{self.prefix}:job:{job_id}:deps"

    def dependents(self, job_id: int) -> str:
        """set of the ids of the jobs that depend on a job."""
        return f"{self.prefix}:job:{job_id}:dependents"

    def results(self, job_id: int) -> str:
        """hash of the results its dependencies completed with: id -> result (JSON)."""
        return f"{self.prefix}:job:{job_id}:results"

    def runs(self, job_id: int) -> str:
        """hash of a fan-out job's runs: worker id -> the run as JSON (state, token, times,
        result or error, tries; see kue_core/features/runs.py)."""
        return f"{self.prefix}:job:{job_id}:runs"

    def schedule(self, key: str) -> str:
        """hash of one schedule: its definition, runs made, last job (see
        kue_core.jobs.schedules)."""
        return f"{self.prefix}:schedule:{key}"

    def worker(self, worker_id: str) -> str:
        """Hash describing one worker process (host, pid, types, jobs held, heartbeat)."""
        return f"{self.prefix}:worker:{worker_id}"

    def unique(self, key: str) -> str:
        """The id of the job holding a unique key (modes until_done, throttle, debounce)."""
        return f"{self.prefix}:unique:{key}"

    @property
    def unique_jobs(self) -> str:
        """Node kue-unique's hash, unique key -> job id (mode reuse)."""
        return f"{self.prefix}:unique:jobs"

    def tag(self, tag: str) -> str:
        """zset of the jobs with a tag: member zid, score = when tagged (ms)."""
        return f"{self.prefix}:tag:{tag}"

    def word(self, word: str) -> str:
        """zset of the jobs a search word finds: member zid, score 0 (so in id order)."""
        return f"{self.prefix}:words:{word}"

    def finished(self, state: str) -> str:
        """zset of the jobs that ended ``state`` (complete, failed): member zid, score = when
        they ended (ms); retention removes from its oldest end."""
        return f"{self.prefix}:finished:{state}"

    def control(self, worker_id: str) -> str:
        """Pub/sub channel of one worker process: an attempt ended by hand, a request to stop."""
        return f"{self.prefix}:control:{worker_id}"

    def timings(self, job_type: str, day: str, kind: str) -> str:
        """Wait or run statistics (``kind``) of a type on a UTC day (``YYYY-MM-DD``): a hash
        of ``count``, ``sum`` and ``sumsq`` (ms) and ``le:<ms>``/``le:inf`` bucket counts."""
        return f"{self.prefix}:stats:{job_type}:{day}:{kind}"

    def series(self, step: str, chunk: int, job_type: str | None) -> str:
        """hash of the history's points of a step (``m``, ``h``, ``d``) in one chunk of time
        (an hour of minutes, a day of hours, 30 days), of a type or (``None``) of all: field =
        the point's index in the chunk, value = the point (see kue_core/features/history.py)."""
        key = f"{self.prefix}:history:{step}:{chunk}"
        return key if job_type is None else f"{key}:{job_type}"

    def bulk(self, run_id: str) -> str:
        """hash: the progress of a bulk action on a filter (kue_core/features/bulk.py): action,
        filter (JSON), matched, done, state, started_at, updated_at, stop; kept a day."""
        return f"{self.prefix}:bulk:{run_id}"

    def deploys(self, job_type: str | None) -> str:
        """zset of the changes of the versions serving a type (or any, ``None``): member =
        JSON (at, versions, was), score = when (ms)."""
        key = f"{self.prefix}:history:deploys"
        return key if job_type is None else f"{key}:{job_type}"

    def minute(self, outcome: str, minute: int) -> str:
        """Jobs that ended ``outcome`` (complete, failed) in one minute since the epoch;
        kept a day."""
        return f"{self.prefix}:stats:{outcome}:{minute}"

    def state(self, state: str) -> str:
        return f"{self.prefix}:jobs:{state}"

    def type_state(self, job_type: str, state: str) -> str:
        return f"{self.prefix}:jobs:{job_type}:{state}"

    def tokens(self, job_type: str) -> str:
        """Kue's wake-up list: one entry pushed per transition to inactive."""
        return f"{self.prefix}:{job_type}:jobs"

    def rate(self, job_type: str) -> str:
        """zset: the starts of a rate-limited type (member id:lease, score = ms)."""
        return f"{self.prefix}:rate:{job_type}"

    def limited(self, job_type: str) -> str:
        """list: wakes the slots held back by the type's limits (a place freed, limits changed)."""
        return f"{self.prefix}:{job_type}:limited"

    def groups(self, job_type: str) -> str:
        """zset: the type's groups with jobs waiting, scored by their turn (see limits.py)."""
        return f"{self.prefix}:groups:{job_type}"

    def group(self, job_type: str, group: str) -> str:
        """zset: the group's waiting jobs (zid -> priority)."""
        return f"{self.prefix}:group:{job_type}:{group}"

    def group_active(self, job_type: str, group: str) -> str:
        """zset: the group's running jobs (zid -> start ms)."""
        return f"{self.prefix}:group-active:{job_type}:{group}"

    def group_rate(self, job_type: str, group: str) -> str:
        """zset: the group's starts under a group rate (member id:lease, score = ms)."""
        return f"{self.prefix}:group-rate:{job_type}:{group}"

    def feed(self, event: str, job_type: str) -> str:
        """list: ``<type>/<id>`` of each of the type's jobs that had ``event`` (complete,
        failed) since its feed started, newest first; ``kue rules`` takes them from it."""
        return f"{self.prefix}:feed:{event}:{job_type}"

    def feed_taken(self, event: str, job_type: str) -> str:
        """list: the feed's entries ``kue rules`` has taken and not yet handled."""
        return f"{self.prefix}:feed-taken:{event}:{job_type}"

    def feed_failed(self, event: str, job_type: str) -> str:
        """list: the feed's entries whose rules failed (kue rules' dead letters)."""
        return f"{self.prefix}:feed-failed:{event}:{job_type}"

    def places(self, job_type: str, worker_id: str) -> str:
        """zset: the type's jobs pinned to the worker and waiting for it (zid -> priority);
        its claims look here (see pins.py)."""
        return f"{self.prefix}:places:{job_type}:{worker_id}"

    def wake(self, job_type: str, worker_id: str) -> str:
        """list: wakes an idle slot of the worker when a job of the type is pinned to it."""
        return f"{self.prefix}:wake:{job_type}:{worker_id}"

    def open(self, job_type: str) -> str:
        """zset: the type's active fan-out jobs without workers of their own that have a
        place open for another run (zid -> priority); its claims look here (see runs.py)."""
        return f"{self.prefix}:open:{job_type}"

    def late(self, job_type: str) -> str:
        """zset: the type's unfinished ``fan_out("all", late_joiners=True)`` jobs (zid ->
        priority); a claim of the type by a worker not among their targets joins them."""
        return f"{self.prefix}:late:{job_type}"

    def resumed(self, job_type: str) -> str:
        """Wake-up list of the slots that found their type paused: pushed on resume."""
        return f"{self.prefix}:{job_type}:resumed"

    # -- names under the prefix (kue doctor's scans and scripts) ----------------------------
    def match(self, rest: str) -> str:
        """SCAN MATCH pattern of the keys ``<prefix>:<rest>``: ``rest`` is a glob, the prefix
        is taken literally whatever characters it holds."""
        return f"{glob_escape(self.prefix)}:{rest}"

    def name(self, key: str) -> str:
        """A key without ``<prefix>:`` (``q:jobs:inactive -> jobs:inactive``): how the
        ``inspect`` and ``repair`` scripts name the sets they read (they add the prefix)."""
        head = f"{self.prefix}:"
        if not key.startswith(head):
            raise ValueError(f"{key!r} is not under the prefix {self.prefix!r}")
        return key[len(head) :]

    def named(self, name: str) -> str:
        """Inverse of :meth:`name`."""
        return f"{self.prefix}:{name}"

    def job_key(self, key: str) -> tuple[int, str] | None:
        """``(id, part)`` for a key of one job: part ``""`` for its hash ``<prefix>:job:<id>``,
        ``"log"`` or ``"history"`` for those lists, ``"deps"``, ``"dependents"`` or
        ``"results"`` for its dependencies' keys, ``"runs"`` for a fan-out job's runs, ``"stream"``
        for its stream of partial output; None for any other key."""
        head = f"{self.prefix}:job:"
        if not key.startswith(head):
            return None
        digits, _, part = key[len(head) :].partition(":")
        if not (digits.isascii() and digits.isdigit()) or part not in JOB_PARTS:
            return None
        job_id = int(digits)
        if str(job_id) != digits:
            return None  # leading zeros: no job of ours is named so
        return job_id, part

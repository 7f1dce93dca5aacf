"""The job: its options and fields (:mod:`.spec`), the operations that save and load jobs,
written once for both clients (:mod:`.ops`, flows, records, schedules), waiting for a job's
end, and the job of each client (:mod:`.job` blocking, :mod:`.aio_job` asyncio), with where a
worker's job writes its progress and log lines from the worker's event loop (:mod:`.notes`).
Built on the features, the store and the base."""

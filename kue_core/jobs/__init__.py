"""The job: its options and fields (:mod:`.spec`), the operations that save and load jobs,
written once for both clients (:mod:`.ops`, flows, records, schedules), waiting for a job's
end, and the job of each client (:mod:`.job` blocking, :mod:`.aio_job` asyncio). Built on the
features, the store and the base."""

"""The parts of the two clients, by capability: records, schedules and workers of ``Queue``
(:mod:`kue_core.queue`), plans and records of ``AsyncQueue`` (:mod:`kue_core.aio`). Each runs
the operations of :mod:`kue_core.jobs` and the features on its client."""

"""The capabilities of a job beyond Kue's, each a module with its options, its rules and the
operations it does on its own keys: dependencies (flows), pins, fan-out runs, limits,
records (tags, tracking, search, retention), statistics, feeds, schedule rules and job
control. Features do not load or save jobs (that is :mod:`kue_core.jobs`); they import the
store and the base only."""

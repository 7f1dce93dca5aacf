"""The base of kue_core: errors, job states, Redis key names, input checks and values, and
retry pacing. Pure: no Redis connection; imports nothing of kue_core but
:mod:`kue_core.defaults`."""

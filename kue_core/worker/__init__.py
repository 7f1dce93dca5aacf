"""The worker runtime of a process: its slots and their loop (:mod:`.serving`), attempts and
how they end, middleware, handlers in child processes, the keeper (leases, sweeps,
ttl), the promotion timer, the worker id and the signals that stop it; :mod:`.workers` starts
and stops them. Built on the jobs, the features, the store and the base."""

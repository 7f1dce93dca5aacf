"""The store: Redis and the Lua that changes it. Cluster routing, the embedded server, the
scripts' source and how they run (functions or EVALSHA, on either client), the calls an
operation yields, what a worker's scripts answer, and the event channel. Imports only
:mod:`kue_core.base` (and :mod:`kue_core.defaults`)."""

"""Recipe: a Django project that enqueues jobs when a transaction commits and runs workers as a
management command (see docs/recipes.md).

* :mod:`.jobs`: the project's queue, and ``enqueue_on_commit``: a job saved only once the
  transaction that asked for it commits (none for one rolled back);
* :mod:`.orders`: placing an order, which asks for its confirmation job that way;
* :mod:`.handlers`: the worker's side, using the ORM;
* ``management/commands/kue_worker.py``: ``django-admin kue_worker``, the workers;
* :mod:`.settings`: ``KUE_REDIS_URL``, ``KUE_PREFIX`` and ``KUE_HANDLERS``.
"""

"""kue_example: the demo that ``kue example`` runs, written as code to copy.

* :mod:`kue_example.handlers`: one handler per job type (emails, video transcodes with
  progress and a log, flaky webhook deliveries, reminders);
* :mod:`kue_example.producer`: creates jobs of every kind, with priorities, retries with
  backoff, and delays;
* :mod:`kue_example.listener`: prints each outcome once (complete, retrying, failed), from any
  process;
* :mod:`kue_example.demo`: starts all three on one queue, with schedules, limits and the rules
  of ``rules.hjson``.

Recipes for web frameworks (docs/recipes.md; the framework is yours to install):

* :mod:`kue_example.fastapi_app`: FastAPI enqueueing with ``AsyncQueue``, a job's progress
  streamed over Server-Sent Events;
* :mod:`kue_example.flask_app`: the dashboard under ``/admin/queue``, behind the app's login;
* :mod:`kue_example.django_shop`: Django, jobs saved on commit, ``django-admin kue_worker``.
"""

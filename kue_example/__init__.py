"""kue_example: the demo that ``kue example`` runs, written as code to copy.

* :mod:`kue_example.handlers`: one handler per job type (emails, video transcodes with
  progress and a log, flaky webhook deliveries, reminders);
* :mod:`kue_example.producer`: creates jobs of every kind, with priorities, retries with
  backoff, and delays;
* :mod:`kue_example.listener`: prints jobs as they complete or fail, from any process;
* :mod:`kue_example.demo`: starts all three on one queue.
"""

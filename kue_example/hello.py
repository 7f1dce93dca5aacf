"""kue in one file: a producer and a worker on one queue. ``python kue_example/hello.py``
(an embedded Redis in ./.kue, or the one KUE_REDIS_URL names); Ctrl-C stops it gracefully.
Its jobs have a type of their own, ``greeting``: run in the folder of ``kue example`` (whose
workers serve email, video, webhook...), neither takes the other's jobs."""

from typing import Any

from kue_core import Job, Queue

queue = Queue()


def send_greeting(job: Job) -> dict[str, Any]:
    print(f"greeting {job.data['to']}: {job.data['text']!r}")
    return {"sent": True}


queue.process("greeting", 4, send_greeting)  # up to 4 at a time
job = queue.create_job("greeting", {"to": "ada@example.com", "text": "hello"}).attempts(3).save()
print(f"job {job.id} -> {job.wait(10)}")  # job 1 -> {'sent': True}
queue.run()  # serve until Ctrl-C or SIGTERM; running jobs finish first

"""kue in one file: a producer and a worker on one queue. ``python kue_example/hello.py``
(an embedded Redis in ./.kue, or the one KUE_REDIS_URL names); Ctrl-C stops it gracefully."""

from typing import Any

from kue_core import Job, Queue

queue = Queue()


def send_email(job: Job) -> dict[str, Any]:
    print(f"sending {job.data['subject']!r} to {job.data['to']}")
    return {"sent": True}


queue.process("email", 4, send_email)  # up to 4 at a time
job = queue.create_job("email", {"to": "ada@example.com", "subject": "hello"}).attempts(3).save()
print(f"job {job.id} -> {job.wait(10)}")  # job 1 -> {'sent': True}
queue.run()  # serve until Ctrl-C or SIGTERM; running jobs finish first

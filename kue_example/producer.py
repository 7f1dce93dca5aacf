"""An example producer: jobs of every kind, with the options each one needs."""

from __future__ import annotations

import random
import threading

from kue_core import Job, Queue

from .tasks import DemoTasks
from .tasks import a_few as typed_calls

USERS = ("ada", "grace", "linus", "margaret", "ken", "barbara", "dennis", "frances")


def email(queue: Queue, to: str, *, reset: bool = False) -> Job:
    """A welcome mail (high priority), or a password reset (critical: it jumps the queue).
    Tagged with its user, so that the Tags page finds every mail of one."""
    title = f"{'password reset' if reset else 'welcome'} for {to}"
    return (
        queue.create_job("email", {"title": title, "to": to})
        .priority("critical" if reset else "high")
        .attempts(3)
        .ttl(10_000)  # an attempt taking longer than 10 s fails (and is retried)
        .tag(f"user-{to.split('@')[0]}" if "@" in to else "no-address")
    )


def video(queue: Queue, name: str, *, frames: int = 1200) -> Job:
    """A long transcode, at low priority: emails go first when workers are busy."""
    return (
        queue.create_job(
            "video",
            {"title": f"transcode {name}", "file": name, "format": "webm", "frames": frames},
        )
        .priority("low")
        .ttl(60_000)
    )


def webhook(queue: Queue, url: str) -> Job:
    """A flaky delivery: 3 attempts, retried after 0.5 s, then 1.5 s (exponential). In the
    group of its receiving user: the demo lets one delivery run per user at a time."""
    return (
        queue.create_job("webhook", {"title": f"POST {url}", "url": url})
        .priority("medium")
        .attempts(3)
        .backoff({"type": "exponential", "delay": 1000})
        .group(url.rsplit("/", 1)[-1])
    )


def reminder(queue: Queue, user: str, in_seconds: float) -> Job:
    """Delayed: it stays in the delayed state until it is due, then runs."""
    return queue.create_job(
        "reminder", {"title": f"remind {user} in {in_seconds:g} s", "user": user}
    ).delay(int(in_seconds * 1000))


def report(queue: Queue, title: str, pages: int) -> Job:
    """A report built page by page, reporting its progress."""
    return queue.create_job("report", {"title": title, "pages": pages})


def monthly_report(queue: Queue, month: str) -> Job:
    """A small flow, saved all or nothing: the figures, then the charts made from them,
    then the mail that sends them; each job waits (blocked) until the one below it
    completes. Returns the mail, the flow's root."""
    figures = report(queue, f"{month} figures", 3)
    charts = report(queue, f"{month} charts", 2)
    mail = queue.create_job("email", {"title": f"{month} report", "to": "board@example.com"})
    return queue.flow(mail.priority("high").tag("reports"), [(charts, [figures])])


def pinned_video(queue: Queue, name: str, worker_id: str) -> Job:
    """A transcode that only the worker process ``worker_id`` may run (say, the one with the
    GPU): it waits in the pinned state until that worker takes it."""
    return video(queue, name, frames=300).only([worker_id]).save()


def a_few(queue: Queue, rng: random.Random) -> list[Job]:
    """One round of the mix: mostly emails, some webhooks and reminders, now and then a video
    or a password reset. Saved together in one round trip."""
    user = rng.choice(USERS)
    jobs = [email(queue, f"{user}@example.com")]
    if rng.random() < 0.4:
        jobs.append(webhook(queue, f"https://hooks.example.com/{user}"))
    if rng.random() < 0.25:
        jobs.append(reminder(queue, user, rng.choice((5, 10, 30, 60))))
    if rng.random() < 0.1:
        jobs.append(video(queue, f"{user}-{rng.randrange(1000)}.mov"))
    if rng.random() < 0.05:
        jobs.append(email(queue, f"{user}@example.com", reset=True))
    return queue.save_many(jobs)


def signup(queue: Queue, user: str) -> None:
    """An event for the rules (kue_example/rules.hjson): another program saying that a user
    signed up, on a plain Redis list; a rule makes the welcome mail."""
    queue.client.lpush("signups", f"signup/{user}")


def produce(
    queue: Queue,
    stop: threading.Event,
    rounds_per_second: float = 2.0,
    signups: bool = True,
    tasks: DemoTasks | None = None,
) -> None:
    """Create jobs until ``stop`` is set. A first burst fills every state at once; now and
    then a flow of reports, a pinned transcode and (with ``signups``) a signup; calls of the
    typed ``tasks`` when given."""
    rng = random.Random()
    burst = [email(queue, f"{u}@example.com") for u in USERS]
    burst += [webhook(queue, f"https://hooks.example.com/{u}") for u in USERS[:4]]
    burst += [video(queue, "intro.mov", frames=600), video(queue, "keynote.mov")]
    burst += [reminder(queue, u, s) for u, s in (("ada", 3), ("ken", 15), ("grace", 45))]
    burst.append(email(queue, "no address", reset=True))  # fails at once: NoRetry
    queue.save_many(burst)
    monthly_report(queue, "November")
    pinned_video(queue, "trailer.mov", queue.worker_id)
    if signups:
        signup(queue, rng.choice(USERS))
    rounds = 0
    while not stop.wait(1 / rounds_per_second):
        a_few(queue, rng)
        if tasks is not None:
            typed_calls(tasks, rng, rng.choice(USERS))
        rounds += 1
        if rounds % 20 == 0:
            monthly_report(queue, rng.choice(("October", "December")))
        if rounds % 10 == 0:
            pinned_video(queue, f"render-{rounds}.mov", queue.worker_id)
        if signups and rounds % 15 == 0:
            signup(queue, rng.choice(USERS))

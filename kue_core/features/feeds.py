"""Feeds: a durable copy of some job events of a type, for programs that must not miss one.

Kue's events go out on pub/sub, which a listener that is down (or slow to reconnect) misses.
``queue.feed("acq", "complete")`` makes every job of type ``acq`` that completes from then on
also push ``"acq/<id>"`` onto the list ``<p>:feed:complete:acq``, in the same script call that
completes it. A reader takes entries with ``BLMOVE`` into a list of its own (``kue rules``
does: :data:`Keys.feed_taken`), so an entry is in one list or the other whatever crashes.

The feed flag is one field of the type's rules in ``<p>:limits``, which the transitions that
end a job already read (see ``publish`` in ``scripts/lib/events.lua``): a type without feeds pays
nothing. Jobs ended by Node Kue's own code are not fed (it publishes its events itself).
"""

from __future__ import annotations

import json

from ..base.errors import InvalidJob
from ..base.keys import Keys
from ..base.values import validate_type
from ..store import calls
from ..store.calls import Call, Op, hash_reply, read

#: The job events a feed may carry (FEED_EVENTS in lib/type_rules.lua): those that end a job.
FEED_EVENTS = ("complete", "failed")


def _event(event: object) -> str:
    if event not in FEED_EVENTS:
        raise InvalidJob(f"a feed carries one of {', '.join(FEED_EVENTS)}, got {event!r:.100}")
    return event


def switch(keys: Keys, job_type: str, event: str, on: bool) -> Call[None]:
    """The call that starts (``on``) or stops a feed, once its type and event are checked
    (``Queue.feed``, ``Queue.unfeed``). Starting a feed that runs changes nothing; stopping
    one deletes what its list holds (a reader's own lists stay)."""
    return calls.feed(keys, validate_type(job_type), _event(event), on)


def feeds(keys: Keys) -> Op[dict[str, list[str]]]:
    """Every type with a feed: type -> its events (``Queue.feeds``)."""
    (reply,) = yield read(("HGETALL", keys.limits))
    out = {}
    for job_type, text in sorted(hash_reply(reply).items()):
        try:
            rules = json.loads(text)
        except ValueError:
            continue  # kue doctor reports it (bad-limits)
        fed = rules.get("feeds") if isinstance(rules, dict) else None
        if isinstance(fed, dict) and fed:
            out[job_type] = sorted(e for e in fed if e in FEED_EVENTS)
    return out

"""What a check needs of the doctor's check in progress (``core.Check``): one Protocol, which
the package's checks (``deps``, ``records``, ``schedules``, ``limits``, ``pins``, ``runs``)
and those other packages plug in (``kue_rules.doctor``) are written against."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import redis

from ..base.keys import Keys, zid
from ..base.payloads import Offload

if TYPE_CHECKING:
    from ..store.transport import Transport


class Checker(Protocol):
    """A check in progress: where to read, how much at once, and where findings go."""

    client: redis.Redis
    keys: Keys
    scripts: Transport
    batch: int
    #: ms: what was written this recently may be a write in progress, not a finding.
    grace: int
    #: The queue's payload limits and store, or None (see kue_core.base.payloads).
    offload: Offload | None

    def add(
        self,
        kind: str,
        key: str,
        problem: str,
        repair: str,
        job_id: int | None = None,
        action: tuple[str, str, str, str] | None = None,
    ) -> None: ...


def pages(c: Checker, key: str) -> Iterator[list[str]]:
    """The members of zset ``key``, ``c.batch`` at a time (ZSCAN: no long call)."""
    page: list[str] = []
    for member, _ in c.client.zscan_iter(key, count=c.batch):
        page.append(str(member))
        if len(page) == c.batch:
            yield page
            page = []
    if page:
        yield page


def member_id(member: str) -> int | None:
    """The job id of a zset member (``"01|7"`` -> 7), or None for a member that is no job's."""
    digits = member.partition("|")[2]
    if not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits) if zid(int(digits)) == member else None

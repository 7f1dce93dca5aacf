"""The trash of the payload store (see :mod:`kue_core.base.payloads`): the names of values no
job holds any more (removed, retained away, or whose data was replaced), which a process with
the store deletes from it (``queue.sweep_payloads()``, every worker every few seconds). A name
is taken from the list before its value is deleted, and put back when the deletion fails, so
that two sweeping processes never both take it, and none is lost."""

from __future__ import annotations

from ..base.keys import Keys
from ..store.calls import Op, read


def take(keys: Keys, batch: int) -> Op[list[str]]:
    """At most ``batch`` names from the trash, taken out of it."""
    (names,) = yield read(("LPOP", keys.payload_trash, batch))
    return [str(n) for n in names or ()]


def put_back(keys: Keys, names: list[str]) -> Op[None]:
    """Names whose deletion failed, back in the trash for a later sweep."""
    if names:
        yield read(("RPUSH", keys.payload_trash, *names))

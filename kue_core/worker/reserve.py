"""The order in which a slot that serves several types claims from them (qless's reservers):
``ordered`` tries the types as given, so the first with a job waiting wins; ``round-robin``
starts one type further at each claim; ``shuffled`` does the same through an order shuffled
again at each round. Shared by the slots of one ``process()`` call, so a pool of ``n`` slots
rotates as one. The claim tries the types in this order in one script call (``claim.lua``).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

from ..base.errors import InvalidJob
from ..base.values import validate_type

RESERVERS = ("ordered", "round-robin", "shuffled")


class Reserver:
    """The claim order of one pool of slots over ``types``."""

    def __init__(self, types: Sequence[str], how: str) -> None:
        if how not in RESERVERS:
            raise InvalidJob(f"reserve must be one of {', '.join(RESERVERS)}, got {how!r}")
        self.types = tuple(types)
        self.how = how
        self._lock = threading.Lock()
        self._turn = 0
        self._order = list(self.types)

    def order(self) -> list[str]:
        """The types to try for the next claim, in order."""
        if self.how == "ordered" or len(self.types) == 1:
            return list(self.types)
        with self._lock:
            at = self._turn % len(self._order)
            if at == 0 and self.how == "shuffled":
                random.shuffle(self._order)
            self._turn += 1
            return self._order[at:] + self._order[:at]


def job_types(given: object) -> tuple[str, ...]:
    """The types a ``process()`` call serves: one type, or a non-empty list of distinct ones."""
    if isinstance(given, str):
        return (validate_type(given),)
    if not isinstance(given, list | tuple) or not given:
        raise InvalidJob(f"job_type is a type or a non-empty list of types, got {given!r:.100}")
    types = tuple(validate_type(t) for t in given)
    if len(set(types)) != len(types):
        raise InvalidJob(f"the types of one process() call are distinct, got {list(types)!r:.100}")
    return types

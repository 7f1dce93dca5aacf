"""Steps remembered across attempts (issue 55, third step): ``job.step("charge", fn, *args)``
in a handler runs ``fn`` once and records its JSON result with the job (``step.lua``, fenced
by the attempt's token: hash field ``step:<name>``); a later attempt of the same job (a retry,
a resumption after a signal, a recovery after its worker died) gets the recorded result
without running ``fn`` again. So a job of ten steps that fails at the ninth does not charge
the card again. A step's result goes through JSON both times: the first run returns what a
replay would (a tuple comes back a list). An encrypted queue seals it (field ``step``).

What a step does outside Redis is only as safe as its record: a worker that dies after
``fn`` returned and before the record was written runs ``fn`` again in the next attempt (at
least once, as every job is); the record itself is never lost once ``step()`` returned.
"""

from __future__ import annotations

import json
from typing import Any

from .. import defaults
from ..base.errors import InvalidJob, check_field_name
from ..base.sealing import Keyring, opened_text
from ..base.values import to_json

#: The prefix of a step's field in its job's hash.
FIELD = "step:"


def from_hash(h: dict[str, str]) -> dict[str, str]:
    """The steps a job's hash records: name -> result as stored (a plain job has none)."""
    if "steps" not in h:
        return {}
    return {k[len(FIELD) :]: v for k, v in h.items() if k.startswith(FIELD)}


def check_name(name: object) -> str:
    """A step's name: as a signal's (letters, digits and ``_.:-``)."""
    return check_field_name("step", name)


def recorded(stored: str, ring: Keyring | None) -> Any:
    """A recorded result, as the step returns it."""
    return json.loads(opened_text(ring, stored, "step"))


def stored(value: Any, ring: Keyring | None) -> tuple[str, Any]:
    """A step's result to record (JSON, at most ``STEP_RESULT_BYTES``, sealed with the
    queue's keys), and the value the step returns (read back from that JSON)."""
    text = to_json(value, "a step's result")
    most = defaults.STEP_RESULT_BYTES
    if len(text) > most // 4 and len(text.encode()) > most:
        raise InvalidJob(f"a step's result is at most {most:,} bytes of JSON")
    return (text if ring is None else ring.seal(text, "step")), json.loads(text)

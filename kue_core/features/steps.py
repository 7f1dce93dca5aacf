"""Steps remembered across attempts (issue 55, third step): ``job.step("charge", fn, *args)``
in a handler runs ``fn`` once and records its JSON result with the job (``step.lua``, fenced
by the attempt's token: hash field ``step:<name>``); a later attempt of the same job (a retry,
a resumption after a signal, a recovery after its worker died) gets the recorded result
without running ``fn`` again. So a job of ten steps that fails at the ninth does not charge
the card again. A step's result goes through JSON both times: the first run returns what a
replay would (a tuple comes back a list). An encrypted queue seals it (under its field's
name, ``step:<name>``: a record copied to another step's field does not open).

What a step does outside Redis is only as safe as its record: a worker that dies after
``fn`` returned and before the record was written runs ``fn`` again in the next attempt (at
least once, as every job is); the record itself is never lost once ``step()`` returned.
"""

from __future__ import annotations

import json
from typing import Any

from .. import defaults
from ..base.errors import InvalidJob, check_field_name
from ..base.sealing import Keyring
from ..base.values import to_json

#: The prefix of a step's field in its job's hash.
FIELD = "step:"


def from_hash(h: dict[str, str], opened: Any) -> dict[str, str]:
    """The steps a job's hash records: name -> result as JSON text, opened by
    ``opened(text, field)`` (a plain job has none)."""
    if "steps" not in h:
        return {}
    return {k[len(FIELD) :]: opened(v, k) for k, v in h.items() if k.startswith(FIELD)}


def check_name(name: object) -> str:
    """A step's name: as a signal's (letters, digits and ``_.:-``)."""
    return check_field_name("step", name)


def recorded(text: str) -> Any:
    """A recorded result (its JSON, as ``from_hash`` gives it), as the step returns it."""
    return json.loads(text)


def stored(name: str, value: Any, ring: Keyring | None) -> tuple[str, str]:
    """A step's result to record: as stored (JSON, at most ``STEP_RESULT_BYTES``, sealed with
    the queue's keys), and its JSON."""
    text = to_json(value, "a step's result")
    most = defaults.STEP_RESULT_BYTES
    if len(text) > most // 4 and len(text.encode()) > most:
        raise InvalidJob(f"a step's result is at most {most:,} bytes of JSON")
    return (text if ring is None else ring.seal(text, FIELD + name)), text

"""kue_cli: the ``kue`` command line (``kue example``, ``kue dashboard``, ``kue worker``,
``kue stats``, ``kue doctor``, ``kue job`` (show, list, create...), ``kue cancel``,
``kue move``, ``kue pause``, ``kue resume``, ``kue stop-worker``, ``kue search``,
``kue tag``, ``kue untag``, ``kue retention``, ``kue deps``, ``kue remove``, ``kue schedules``,
``kue schedule``, ``kue limits``, ``kue limit``, ``kue groups``, ``kue rules``).
``python -m kue_cli`` runs it too."""

# Their commands join the cli group as they are imported.
from . import (  # noqa: F401
    audit,
    bulk,
    control,
    deps,
    jobs,
    keys,
    limits,
    records,
    rules,
    runs,
    schedules,
    worker,
)
from .cli import main

__all__ = ["main"]

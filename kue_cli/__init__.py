"""kue_cli: the ``kue`` command line (``kue example``, ``kue dashboard``, ``kue worker``,
``kue stats``, ``kue doctor``, ``kue cancel``, ``kue move``, ``kue stop-worker``, ``kue search``,
``kue tag``, ``kue untag``, ``kue retention``, ``kue deps``, ``kue remove``).
``python -m kue_cli`` runs it too."""

from . import control, deps, records  # noqa: F401  (their commands join the cli group as imported)
from .cli import main

__all__ = ["main"]

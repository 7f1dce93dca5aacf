"""kue_cli: the ``kue`` command line (``kue example``, ``kue dashboard``, ``kue worker``,
``kue stats``, ``kue doctor``, ``kue cancel``, ``kue move``, ``kue stop-worker``).
``python -m kue_cli`` runs it too."""

from . import control  # noqa: F401  (its commands join the cli group as it is imported)
from .cli import main

__all__ = ["main"]

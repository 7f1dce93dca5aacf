"""kue_cli: the ``kue`` command line (``kue example``, ``kue dashboard``, ``kue worker``,
``kue stats``). ``python -m kue_cli`` runs it too."""

from .cli import main

__all__ = ["main"]

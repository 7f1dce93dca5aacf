"""``django-admin kue_worker``: run the project's handlers (``settings.KUE_HANDLERS``) until
SIGTERM or Ctrl-C, then shut down gracefully: running jobs get ``--timeout`` seconds."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from kue_core import Job

from ...jobs import queue


def _handler(path: str) -> Callable[[Job], Any]:
    module, _, name = path.partition(":")
    try:
        found: Callable[[Job], Any] = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise CommandError(f"no handler {path}: {e}") from None
    return found


def _fresh_connections(job: Job, call_next: Callable[[], Any]) -> Any:
    """Middleware: a handler's thread drops database connections Django would not reuse
    (closed, or past CONN_MAX_AGE), before the job and after, as a request does."""
    close_old_connections()
    try:
        return call_next()
    finally:
        close_old_connections()


class Command(BaseCommand):  # type: ignore[misc]
    help = "Run kue workers for the project's job types."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--type", action="append", dest="types", help="only these types")
        parser.add_argument("-n", "--concurrency", type=int, default=1)
        parser.add_argument("--timeout", type=float, default=30.0)

    def handle(self, *args: Any, **options: Any) -> None:
        handlers: dict[str, str] = settings.KUE_HANDLERS
        types = options["types"] or sorted(handlers)
        unknown = sorted(set(types) - set(handlers))
        if unknown:
            raise CommandError(f"no handler for {', '.join(unknown)} in KUE_HANDLERS")
        q = queue()
        q.use(_fresh_connections)
        for job_type in types:
            q.process(job_type, options["concurrency"], _handler(handlers[job_type]))

        def ready() -> None:  # once SIGTERM and SIGINT are caught
            self.stdout.write(f"working on {', '.join(types)}", ending="\n")
            self.stdout.flush()

        q.run(options["timeout"], ready=ready)  # until SIGTERM or SIGINT, then a graceful stop

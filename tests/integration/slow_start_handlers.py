"""A handler whose module takes a second to import: a process-isolated child that runs it
starts slowly, as children do when several start at once on a loaded machine."""

from __future__ import annotations

import os
import time

from kue_core import Job

# Not a wait for anything: this module stands for a slow start-up.
time.sleep(1.0)


def quick(job: Job) -> int:
    return os.getpid()

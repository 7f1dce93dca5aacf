"""kue_core: a priority job queue on Redis, compatible with Kue 0.11."""

from .errors import (
    ConnectionFailed,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    KueError,
    NoRetry,
    NotReplicated,
)
from .events import EVENTS
from .job import Job
from .queue import Queue
from .states import PRIORITIES, JobState

__all__ = [
    "EVENTS",
    "PRIORITIES",
    "ConnectionFailed",
    "InvalidJob",
    "InvalidTransition",
    "Job",
    "JobNotFound",
    "JobState",
    "KueError",
    "NoRetry",
    "NotReplicated",
    "Queue",
]

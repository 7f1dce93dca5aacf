"""kue_core: a priority job queue on Redis, compatible with Kue 0.11.

The names below are its public API (what ``kue_http``, ``kue_cli`` and applications use); the
modules ``defaults`` (every default, documented), ``connection`` (Redis URLs, the embedded
Redis), ``sealing`` (encryption keys, docs/security.md), ``payloads`` (large payloads outside
Redis, docs/payloads.md) and ``tracing`` (OpenTelemetry, off
until enabled) are public too. The asyncio client
is ``kue_core.aio.AsyncQueue``.
"""

from . import connection, defaults, payloads, sealing, tracing
from .base.errors import (
    BulkCountChanged,
    BulkNotFound,
    CannotDecrypt,
    ConnectionFailed,
    HasDependents,
    InvalidEncryptionKeys,
    InvalidJob,
    InvalidLimit,
    InvalidSchedule,
    InvalidTransition,
    InvalidWorkerConfig,
    JobFailed,
    JobNotFound,
    KueError,
    NoCurrentJob,
    NoRetry,
    NotReplicated,
    PayloadTooLarge,
    PayloadUnavailable,
    RateLimited,
    ScheduleNotFound,
    Stopped,
    WaitForSignal,
    WaitTimeout,
    WorkerIdTaken,
    WorkerNotFound,
)
from .base.keys import Keys
from .base.states import PRIORITIES, PRIORITY_LIMIT, STATES, JobState, priority_name
from .clients.tasks import TASK_OPTIONS, AsyncTask, Task
from .features.bulk import ACTIONS as BULK_ACTIONS
from .features.bulk import FIELDS as BULK_FILTER_FIELDS
from .features.bulk import MAX_EXAMPLES as BULK_MAX_EXAMPLES
from .features.feeds import FEED_EVENTS
from .features.flows import POLICIES as DEPENDENCY_POLICIES
from .features.flows import dependency_ids
from .features.history import RANGES as HISTORY_RANGES
from .features.pins import WORKER_ID_RULE
from .features.runs import apply_json as apply_fan_out
from .features.schedule_rules import CATCH_UP as SCHEDULE_CATCH_UP
from .features.schedule_rules import LATEST as SCHEDULE_LATEST
from .features.search import Found
from .features.signals import TOLD as SIGNAL_MESSAGES
from .features.streams import Part as StreamPart
from .features.streams import Reading as StreamReading
from .jobs.current import current_job
from .jobs.flow_ops import Node as FlowNode
from .jobs.flow_tree import CHILDREN as FLOW_TREE_CHILDREN
from .jobs.flow_tree import LIMIT as FLOW_TREE_LIMIT
from .jobs.flow_tree import MAX_CHILDREN as FLOW_TREE_MAX_CHILDREN
from .jobs.flow_tree import MAX_LIMIT as FLOW_TREE_MAX_LIMIT
from .jobs.job import Job, parse_priority, parse_state, validate_type
from .jobs.log_lines import LogLine
from .jobs.schedules import OPTIONS as JOB_OPTIONS
from .jobs.schedules import apply_options as apply_job_options
from .queue import Queue
from .store.events import EVENTS, Event, EventStream
from .worker.identity import installed_version

__all__ = [
    "BULK_ACTIONS",
    "BULK_FILTER_FIELDS",
    "BULK_MAX_EXAMPLES",
    "DEPENDENCY_POLICIES",
    "EVENTS",
    "FEED_EVENTS",
    "FLOW_TREE_CHILDREN",
    "FLOW_TREE_LIMIT",
    "FLOW_TREE_MAX_CHILDREN",
    "FLOW_TREE_MAX_LIMIT",
    "HISTORY_RANGES",
    "JOB_OPTIONS",
    "PRIORITIES",
    "PRIORITY_LIMIT",
    "SCHEDULE_CATCH_UP",
    "SCHEDULE_LATEST",
    "SIGNAL_MESSAGES",
    "STATES",
    "TASK_OPTIONS",
    "WORKER_ID_RULE",
    "AsyncTask",
    "BulkCountChanged",
    "BulkNotFound",
    "CannotDecrypt",
    "ConnectionFailed",
    "Event",
    "EventStream",
    "FlowNode",
    "Found",
    "HasDependents",
    "InvalidEncryptionKeys",
    "InvalidJob",
    "InvalidLimit",
    "InvalidSchedule",
    "InvalidTransition",
    "InvalidWorkerConfig",
    "Job",
    "JobFailed",
    "JobNotFound",
    "JobState",
    "Keys",
    "KueError",
    "LogLine",
    "NoCurrentJob",
    "NoRetry",
    "NotReplicated",
    "PayloadTooLarge",
    "PayloadUnavailable",
    "Queue",
    "RateLimited",
    "ScheduleNotFound",
    "Stopped",
    "StreamPart",
    "StreamReading",
    "Task",
    "WaitForSignal",
    "WaitTimeout",
    "WorkerIdTaken",
    "WorkerNotFound",
    "apply_fan_out",
    "apply_job_options",
    "connection",
    "current_job",
    "defaults",
    "dependency_ids",
    "installed_version",
    "parse_priority",
    "parse_state",
    "payloads",
    "priority_name",
    "sealing",
    "tracing",
    "validate_type",
]

"""The configuration of ``kue rules``: Resc's format, JSON or Hjson, checked whole at load.

Resc's keys keep Resc's meaning and defaults (``taken_queue`` = input + ``/taken``, ``task``
= ``${input_task}``, no dedupe without ``set``). Ours: ``prefix`` (the kue queue's key prefix),
``failed_queue`` (the dead letters, default input + ``/failed``), ``input_events`` (a watcher
on kue job events), ``make.job`` (a kue job instead of a task string) and a fetch's
``timeout``/``retries``/``backoff``. Any error (a bad regex, an unknown variable or key, a
missing queue) is refused with the file, the rule and the reason, before anything starts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import hjson

from kue_core import FEED_EVENTS, JOB_OPTIONS, Job, Keys, KueError, apply_job_options, validate_type
from kue_core import defaults as core_defaults

from .template import JSON, TEXT, Template, TemplateError, Tree

#: Defaults of a fetch: seconds to wait for the answer, tries after the first, first pause (ms).
FETCH_TIMEOUT, FETCH_RETRIES, FETCH_BACKOFF_MS = 10.0, 3, 200
#: The variables of an event from a job event (``input_events``).
JOB_VARIABLES = {"type": TEXT, "id": JSON, "data": JSON, "result": JSON}


class ConfigError(KueError):
    """The configuration cannot run: where and why."""


@dataclass
class Fetch:
    url: Template
    returns: str
    timeout: float = FETCH_TIMEOUT
    retries: int = FETCH_RETRIES
    backoff_ms: int = FETCH_BACKOFF_MS


@dataclass
class JobSpec:
    type: Template
    data: Tree
    options: dict[str, Tree]


@dataclass
class Make:
    task: Template
    queue: Template | None = None
    set: Template | None = None
    job: JobSpec | None = None


@dataclass
class Rule:
    name: str
    on: re.Pattern[str]
    make: Make
    fetch: list[Fetch] = field(default_factory=list)


@dataclass
class Watcher:
    #: The list events come from (for job events: the type's feed list).
    input: str
    taken: str
    failed: str
    rules: list[Rule]
    #: (type, event) of a watcher on job events, else None.
    events: tuple[str, str] | None = None

    @property
    def label(self) -> str:
        if self.events:
            return f"{self.events[1]} of {self.events[0]}"
        return self.input


@dataclass
class Config:
    path: str
    redis_url: str | None
    prefix: str
    watchers: list[Watcher]


def parse(text: str, path: str = "<config>") -> Any:
    """The document in ``text``: JSON when it is JSON, else Hjson (chosen by content)."""
    try:
        return json.loads(text)
    except ValueError as as_json:
        try:
            return hjson.loads(text, object_pairs_hook=dict)
        except (ValueError, hjson.HjsonDecodeError) as as_hjson:
            raise ConfigError(f"{path}: neither JSON ({as_json}) nor Hjson ({as_hjson})") from None


def load(path: str | Path, prefix: str | None = None) -> Config:
    """The configuration in the file ``path``, checked; ``prefix`` overrides the file's."""
    name = str(path)
    try:
        text = Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{name}: cannot read it: {e}") from None
    return build(parse(text, name), name, prefix)


def build(doc: Any, path: str = "<config>", prefix: str | None = None) -> Config:
    """A checked :class:`Config` from a parsed document."""
    top = _object(doc, path, "the configuration", {"redis", "watchers", "prefix"})
    redis_part = _object(top.get("redis", {}), path, "redis", {"url"})
    url = redis_part.get("url")
    if url is not None and not isinstance(url, str):
        raise ConfigError(f"{path}: redis.url is a string, got {url!r:.100}")
    chosen = prefix or top.get("prefix") or core_defaults.PREFIX
    if not isinstance(chosen, str):
        raise ConfigError(f"{path}: prefix is a string, got {chosen!r:.100}")
    keys = Keys(chosen)
    watchers = top.get("watchers")
    if not isinstance(watchers, list) or not watchers:
        raise ConfigError(f"{path}: watchers is a non-empty list")
    built = [_watcher(w, path, i, keys) for i, w in enumerate(watchers, 1)]
    inputs = [w.input for w in built]
    for w in built:
        if inputs.count(w.input) > 1:
            raise ConfigError(f"{path}: two watchers take from {w.label}")
    return Config(path, url, chosen, built)


def _object(value: Any, path: str, what: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {what} is an object, got {value!r:.100}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ConfigError(
            f"{path}: {what} has the unknown key {unknown[0]!r} "
            f"(its keys are: {', '.join(sorted(allowed))})"
        )
    return cast(dict[str, Any], value)


def _name(value: Any, path: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}: {what} is a non-empty string, got {value!r:.100}")
    return value


_WATCHER_KEYS = {"input_queue", "input_events", "taken_queue", "failed_queue", "rules"}


def _watcher(value: Any, path: str, n: int, keys: Keys) -> Watcher:
    w = _object(value, path, f"watcher {n}", _WATCHER_KEYS)
    events = None
    if ("input_queue" in w) == ("input_events" in w):
        raise ConfigError(f"{path}: watcher {n} needs input_queue or input_events (one of them)")
    if "input_events" in w:
        spec = _object(w["input_events"], path, f"watcher {n}: input_events", {"type", "event"})
        job_type = _name(spec.get("type"), path, f"watcher {n}: input_events.type")
        event = spec.get("event", "complete")
        try:
            validate_type(job_type)
        except KueError as e:
            raise ConfigError(f"{path}: watcher {n}: {e}") from None
        if event not in FEED_EVENTS:
            raise ConfigError(
                f"{path}: watcher {n}: input_events.event is one of {', '.join(FEED_EVENTS)}, "
                f"got {event!r:.100}"
            )
        events = (job_type, event)
        source, taken, failed = (
            keys.feed(event, job_type),
            keys.feed_taken(event, job_type),
            keys.feed_failed(event, job_type),
        )
        if "taken_queue" in w or "failed_queue" in w:
            raise ConfigError(
                f"{path}: watcher {n}: a watcher on job events keeps its lists under the prefix "
                "(no taken_queue or failed_queue)"
            )
    else:
        source = _name(w["input_queue"], path, f"watcher {n}: input_queue")
        taken = _name(w.get("taken_queue", source + "/taken"), path, f"watcher {n}: taken_queue")
        failed = _name(
            w.get("failed_queue", source + "/failed"), path, f"watcher {n}: failed_queue"
        )
        if len({source, taken, failed}) < 3:
            raise ConfigError(
                f"{path}: watcher {n}: its input, taken and failed queues must differ"
            )
    rules = w.get("rules")
    if not isinstance(rules, list) or not rules:
        raise ConfigError(f"{path}: watcher {n} ({source}): rules is a non-empty list")
    built: list[Rule] = []
    named: dict[str, int] = {}
    for i, r in enumerate(rules, 1):
        rule = _rule(r, f"{path}: watcher {n} ({source}), rule {i}", events is not None)
        named[rule.name] = named.get(rule.name, 0) + 1
        if named[rule.name] > 1:  # counters are kept by name: a later namesake is numbered
            rule.name = f"{rule.name} #{named[rule.name]}"
        built.append(rule)
    return Watcher(source, taken, failed, built, events)


_RULE_KEYS = {"name", "on", "fetch", "make"}
_FETCH_KEYS = {"url", "returns", "timeout", "retries", "backoff"}
_MAKE_KEYS = {"task", "queue", "set", "job"}


def _rule(value: Any, where: str, on_events: bool) -> Rule:
    given = value.get("name") if isinstance(value, dict) else None
    shown = f"{where} ({given!r})" if isinstance(given, str) and given else where
    r = _object(value, shown, "the rule", _RULE_KEYS)  # an unknown key names the rule too
    name = r.get("name", where.rsplit(", ", 1)[-1])
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: name is a non-empty string, got {name!r:.100}")
    where = f"{where} ({name!r})"
    if "on" not in r and not on_events:
        raise ConfigError(f"{where}: on (a regular expression) is missing")
    pattern = r.get("on", "")
    if not isinstance(pattern, str):
        raise ConfigError(f"{where}: on is a regular expression (text), got {pattern!r:.100}")
    try:
        on = re.compile(pattern)
    except re.error as e:
        raise ConfigError(f"{where}: on is not a valid regular expression: {e}") from None
    known = {g: TEXT for g in on.groupindex}
    known["input_task"] = TEXT
    if on_events:
        known.update(JOB_VARIABLES)
    fetches = r.get("fetch", [])
    if not isinstance(fetches, list):
        raise ConfigError(f"{where}: fetch is a list")
    built = []
    try:
        for i, f in enumerate(fetches, 1):
            built.append(_fetch(f, f"{where}: fetch {i}", known))
            known[built[-1].returns] = JSON
        make = _make(r.get("make"), where, known)
    except TemplateError as e:
        raise ConfigError(f"{where}: {e}") from None
    return Rule(name, on, make, built)


def _fetch(value: Any, where: str, known: dict[str, str]) -> Fetch:
    f = _object(value, where, "the fetch", _FETCH_KEYS)
    url = _name(f.get("url"), where, "url")
    returns = _name(f.get("returns"), where, "returns")
    if not re.fullmatch(r"[A-Za-z_]\w*", returns):
        raise ConfigError(f"{where}: returns is a variable name, got {returns!r:.100}")
    if returns in known:
        raise ConfigError(f"{where}: returns {returns!r}, a name the rule has already")
    timeout = f.get("timeout", FETCH_TIMEOUT)
    retries = f.get("retries", FETCH_RETRIES)
    backoff = f.get("backoff", FETCH_BACKOFF_MS)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout <= 300:
        raise ConfigError(f"{where}: timeout is seconds, more than 0 and at most 300")
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 100:
        raise ConfigError(f"{where}: retries is a whole number from 0 to 100")
    if not isinstance(backoff, int) or isinstance(backoff, bool) or not 0 <= backoff <= 600_000:
        raise ConfigError(f"{where}: backoff is milliseconds, from 0 to 600000")
    return Fetch(Template(url, known), returns, float(timeout), retries, backoff)


def _make(value: Any, where: str, known: dict[str, str]) -> Make:
    if value is None:
        raise ConfigError(f"{where}: make is missing")
    m = _object(value, where, "make", _MAKE_KEYS)
    if "job" in m:
        if set(m) != {"job"}:
            raise ConfigError(f"{where}: make has job, or task, queue and set, not both")
        return Make(Template("${input_task}", known), job=_job(m["job"], where, known))
    if "queue" not in m:
        raise ConfigError(f"{where}: make has no queue (nor job): where would its task go?")
    parts = {}
    for k in ("task", "queue", "set"):
        if k in m:
            parts[k] = Template(_name(m[k], where, f"make.{k}"), known)
    task = parts.get("task") or Template("${input_task}", known)
    return Make(task, parts["queue"], parts.get("set"))


def _job(value: Any, where: str, known: dict[str, str]) -> JobSpec:
    allowed = {"type", "data", *JOB_OPTIONS}
    j = _object(value, where, "make.job", allowed)
    job_type = Template(_name(j.get("type"), where, "make.job.type"), known)
    if not job_type.paths:
        try:
            validate_type(job_type.text)
        except KueError as e:
            raise ConfigError(f"{where}: make.job.type: {e}") from None
    options = {k: Tree(v, known) for k, v in j.items() if k in JOB_OPTIONS}
    constant = {k: v for k, v in j.items() if k in JOB_OPTIONS and not _templated(v)}
    try:  # what needs no event is checked now; the rest when it is filled
        apply_job_options(Job(cast(Any, None), "check"), constant)
    except KueError as e:
        raise ConfigError(f"{where}: make.job: {e}") from None
    return JobSpec(job_type, Tree(j.get("data", {}), known), options)


def _templated(value: Any) -> bool:
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False

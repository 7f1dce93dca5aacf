"""Kue's JSON API (``docs/http-api.md``): the same routes, field names and shapes, with real
status codes. Every route reads or writes through ``kue_core.Queue``; bad input is refused
before anything is written (in an array of new jobs, as in Kue, the valid ones are saved)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from flask.sansio.blueprints import BlueprintSetupState
from flask.typing import RouteCallable
from werkzeug.exceptions import Forbidden
from werkzeug.routing import PathConverter

from kue_core import (
    STATES,
    Found,
    InvalidJob,
    Job,
    Queue,
    apply_fan_out,
    dependency_ids,
    parse_priority,
    parse_state,
)

from . import redaction, security


class _Api(Blueprint):
    """Kue's Express router takes ``/job/types/`` for ``/job/types``, and Kue clients send the
    slash: every route of this blueprint answers with one trailing slash as without it, directly
    (``strict_slashes=False``), not by a redirect, which a client may not follow with a write."""

    def add_url_rule(
        self,
        rule: str,
        endpoint: str | None = None,
        view_func: RouteCallable | None = None,
        provide_automatic_options: bool | None = None,
        **options: Any,
    ) -> None:
        options.setdefault("strict_slashes", False)
        super().add_url_rule(rule, endpoint, view_func, provide_automatic_options, **options)


api = _Api("kue_api", __name__)

_RANGE = re.compile(r"^(-?\d{1,19})\.\.(-?\d{1,19})\Z")  # \Z: no line break after


def _unique(job: Job, value: Any) -> Job:
    """``options.unique``: ``{"key": str, "mode": str, "ttl": ms}``, mode and ttl optional;
    ``Job.unique`` checks the values."""
    if not isinstance(value, dict) or "key" not in value or set(value) - {"key", "mode", "ttl"}:
        raise InvalidJob('unique is {"key": str, "mode": str, "ttl": ms}, mode and ttl optional')
    mode = value.get("mode", "until_done")
    if mode in CHANGES_HOLDER and not security.user().may("admin"):
        # A duplicate in these modes replaces the data of the job holding the key: a data
        # edit, which is an admin's (kue_http/security.py ADMIN_WRITES).
        raise Forbidden(
            description=f"a unique key in mode {mode} replaces a job's data: this needs the "
            f"admin role; yours is {security.user().role}"
        )
    return job.unique(value["key"], mode, value.get("ttl"))


#: The unique modes in which a duplicate changes the job holding the key.
CHANGES_HOLDER = ("reuse", "debounce")


def _strings(setter: Callable[..., Job], name: str) -> Callable[[Job, Any], Job]:
    """An option that is a list of strings (``tags``, ``searchKeys``)."""

    def apply(job: Job, value: Any) -> Job:
        if not isinstance(value, list) or not value:
            raise InvalidJob(f"{name} is a non-empty list of strings, got {value!r:.100}")
        return setter(job, *value)

    return apply


def _track(job: Job, value: Any) -> Job:
    if not isinstance(value, bool):
        raise InvalidJob(f"track is true or false, got {value!r}")
    return job.track() if value else job


def _depends(job: Job, value: Any) -> Job:
    """``options.depends``: the id of a saved job (an int or a string of digits) or a
    non-empty list of them; the save refuses an id that does not exist."""
    forms = "a job id (an integer or a string of digits) or a non-empty list of them"
    return job.depends_on(*dependency_ids(value, "depends", forms))


#: ``POST /job`` options, Kue's names -> the Job setter that checks and applies them.
_OPTIONS: dict[str, Callable[[Job, Any], Any]] = {
    "attempts": Job.attempts,
    "priority": Job.priority,
    "delay": Job.delay,
    "ttl": Job.ttl,
    "backoff": Job.backoff,
    "removeOnComplete": Job.remove_on_complete,
    "removeOnFail": Job.remove_on_fail,
    "unique": _unique,
    "tags": _strings(Job.tags, "tags"),
    "searchKeys": _strings(Job.search_keys, "searchKeys"),
    "track": _track,
    "depends": _depends,
    "onDependencyFailure": Job.on_dependency_failure,
    "group": Job.group,
    "only": Job.only,
    "fanOut": apply_fan_out,
    "prefer": Job.prefer,
}


class _Rest(PathConverter):
    """``<path:>`` that also matches a line break (werkzeug's ``.`` does not), so that every
    malformed listing reaches the view and is answered 400, not 404. It ends the rule, so one
    trailing slash would be part of it: it is dropped, as on every route of the API."""

    regex = r"[^/][\s\S]*?"

    def to_python(self, value: str) -> str:
        return value.removesuffix("/")


@api.record_once
def _converters(state: BlueprintSetupState) -> None:
    state.app.url_map.converters["rest"] = _Rest


def queue() -> Queue:
    q: Queue = current_app.extensions["kue"]
    return q


def int_arg(name: str, default: int) -> int:
    """An integer query argument; ``InvalidJob`` (400) when it is not one."""
    text = request.args.get(name)
    if text is None:
        return default
    if not re.fullmatch(r"-?\d{1,18}", text):
        raise InvalidJob(f"{name} must be an integer, got {text!r}")
    return int(text)


def bool_arg(name: str) -> bool:
    """A ``true``/``false`` query argument, false when absent; ``InvalidJob`` (400) else."""
    text = request.args.get(name, "false")
    if text not in ("true", "false"):
        raise InvalidJob(f"{name} must be true or false, got {text!r:.100}")
    return text == "true"


def _range(text: str) -> tuple[int, int]:
    m = _RANGE.match(text)
    if not m:
        raise InvalidJob(f"a range is <from>..<to> with integers (0..9), got {text!r}")
    return int(m.group(1)), int(m.group(2))


def done(message: str, job: Job) -> Response:
    """A change's answer: what was done, and the job as it is now (as the user may see it)."""
    return jsonify({"message": message, "job": redaction.job_dict(job)})


# -- reading ------------------------------------------------------------------------------
@api.get("/stats")
def stats() -> Response:
    counts = queue().counts()
    body = {f"{state}Count": counts[state] for state in STATES}
    body["workTime"] = queue().work_time()
    return jsonify(body)


@api.get("/job/types")
def types() -> Response:
    return jsonify(queue().types())


@api.get("/job/search")
def search() -> Response:
    """Kue's search: ids (as strings) of the jobs every word of ``q`` finds (see
    ``GET /search``), newest first; ``state``, ``type``, ``offset`` and ``count`` (default
    100) as there."""
    return jsonify([str(i) for i in search_args(100)])


def search_args(count: int) -> Found:
    """``queue.search`` with the query arguments q, state, type, offset and count."""
    return queue().search(
        request.args.get("q", ""),
        state=request.args.get("state") or None,
        job_type=request.args.get("type") or None,
        offset=int_arg("offset", 0),
        count=int_arg("count", count),
    )


@api.get("/job/<job_id>")
def job(job_id: str) -> Response:
    return jsonify(redaction.job_dict(queue().get_job(job_id)))


@api.get("/job/<job_id>/log")
def log(job_id: str) -> Response:
    found = queue().get_job(job_id)  # 404 for an unknown job (Kue answers [])
    return jsonify(queue().get_log(found.id))  # type: ignore[arg-type]


@api.get("/jobs/<rest:rest>")
def jobs(rest: str) -> Response:
    """Kue's four listing routes, told apart by where the ``from..to`` segment is:
    ``/jobs/R[/order]``, ``/jobs/state/R[/order]``, ``/jobs/type/state/R[/order]`` and
    ``/jobs/type/state/stats``."""
    parts = rest.split("/")
    limit = current_app.config["KUE_MAX_PAGE"]
    by = request.args.get("by", "queue")
    if len(parts) == 3 and parts[2] == "stats":
        return jsonify({"count": queue().count(parts[1], parts[0])})
    if by != "queue":
        shown = redaction.view()
        return jsonify([redaction.job_dict(j, shown) for j in _by_finish(parts, by, limit)])
    if _RANGE.match(parts[0]) and len(parts) <= 2:
        start, stop = _range(parts[0])
        found = queue().range(start, stop, _order(parts[1:]), limit=limit)
    elif len(parts) >= 2 and _RANGE.match(parts[1]) and len(parts) <= 3:
        start, stop = _range(parts[1])
        order = _order(parts[2:])
        found = queue().range_by_state(parts[0], start, stop, order, limit=limit)
    elif 3 <= len(parts) <= 4:
        start, stop = _range(parts[2])
        order = _order(parts[3:])
        found = queue().range_by_type(parts[0], parts[1], start, stop, order, limit=limit)
    else:
        raise InvalidJob(
            "a listing is /jobs/<from>..<to>, /jobs/<state>/<from>..<to> or "
            "/jobs/<type>/<state>/<from>..<to>, each with an optional /asc or /desc"
        )
    shown = redaction.view()
    return jsonify([redaction.job_dict(j, shown) for j in found])


def _by_finish(parts: list[str], by: str, limit: int) -> list[Job]:
    """``?by=finished`` on ``/jobs/state/R[/order]`` and ``/jobs/type/state/R[/order]``: the
    window ``R`` (ranks from 0) of the complete or failed jobs in the order they finished,
    oldest first (``desc``: newest first), not sorted by id after."""
    if by != "finished":
        raise InvalidJob(f"by is queue or finished, got {by!r:.100}")
    at = 1 if len(parts) >= 2 and _RANGE.match(parts[1]) else 2
    if len(parts) < 2 or at >= len(parts) or len(parts) > at + 2 or not _RANGE.match(parts[at]):
        raise InvalidJob("by=finished lists /jobs/<state>/<from>..<to>[/asc|desc], with a type too")
    start, stop = _range(parts[at])
    order = _order(parts[at + 1 :])
    if start < 0 or stop < start or order not in ("asc", "desc"):
        raise InvalidJob("by=finished takes ranks from 0 (<from> <= <to>) and asc or desc")
    if stop - start + 1 > limit:
        raise InvalidJob(f"the range {start}..{stop} asks for more than {limit} jobs")
    job_type, state = (None, parts[0]) if at == 1 else (parts[0], parts[1])
    return queue().page(
        state, job_type, offset=start, count=stop - start + 1, desc=order == "desc", by=by
    )


def _order(rest: list[str]) -> str:
    """The optional last segment; ``Queue`` checks it."""
    return rest[0] if rest else "asc"


# -- writing ------------------------------------------------------------------------------
@api.put("/job/<job_id>/state/<state>")
def set_state(job_id: str, state: str) -> Response:
    new_state = parse_state(state)  # bad input is refused before the job is looked up
    queue().get_job(job_id).set_state(new_state)
    return jsonify({"message": "updated state"})


@api.put("/job/<job_id>/priority/<priority>")
def set_priority(job_id: str, priority: str) -> Response:
    level = parse_priority(int(priority) if re.fullmatch(r"-?\d{1,12}", priority) else priority)
    queue().get_job(job_id).set_priority(level)
    return jsonify({"message": "updated priority"})


@api.delete("/job/<job_id>")
def remove(job_id: str) -> Response:
    """Delete a job, its log and its history. A job that others are blocked waiting for is
    refused (409, ``dependents`` names them) unless ``?cascade=true``, which removes them too,
    and theirs in turn; ``removed`` lists the ids that went, the job's first."""
    cascade = bool_arg("cascade")  # bad input is refused before the job is looked up
    found = queue().get_job(job_id)
    removed = found.remove(cascade=cascade)
    return jsonify({"message": f"job {found.id} removed", "removed": removed})


@api.post("/job")
def create() -> Response | tuple[Response | str, int]:
    """One job object; or an array of them, answered as Kue does: in each element's place,
    ``{"message": "job created", "id": n}`` or ``{"error": ...}``; a duplicate of a job that
    holds its unique key answers ``"job deduplicated"`` with that job's id. The valid elements
    are saved (in one call, in order) even when others are refused; then the answer is 400."""
    body = request.get_json()  # 415 without a JSON content type, 400 when malformed
    if body == {} or body == []:
        return "", 204  # as Kue: nothing to create
    if not isinstance(body, list):
        job = _build(queue(), body)
        queue().save_many([job])
        return jsonify(_created(job))
    built = [_attempt(queue(), item) for item in body]
    _save_valid(queue(), built, body)
    answers = [_created(j) if isinstance(j, Job) else {"error": str(j)} for j in built]
    # Kue answers the first refusal's status; every refusal here is bad input.
    refused = any(isinstance(j, InvalidJob) for j in built)
    return jsonify(answers), 400 if refused else 200


def _save_valid(q: Queue, built: list[Job | InvalidJob], body: list[Any]) -> None:
    """Save the valid jobs of an array, in order: each run of jobs without dependencies in one
    call, and each job with dependencies alone, since only its save can tell that a job it
    names does not exist. Such a refusal takes the job's place in ``built``; the others are
    saved all the same."""
    run: list[tuple[int, Job]] = []
    for i, (job, item) in enumerate(zip(built, body, strict=True)):
        if not isinstance(job, Job):
            continue
        if "depends" not in (item.get("options") or {}):
            run.append((i, job))
            continue
        _save_run(q, run, built)
        run = []
        try:
            job.save()
        except InvalidJob as e:
            built[i] = e
    _save_run(q, run, built)


def _save_run(q: Queue, run: list[tuple[int, Job]], built: list[Job | InvalidJob]) -> None:
    """Save a run of jobs (``(index, job)``) in one call; when the save refuses one (its data
    larger than the queue takes: nothing was written), each alone, the refusals in ``built``."""
    if not run:
        return
    try:
        q.save_many([job for _, job in run])
    except InvalidJob:
        for i, job in run:
            try:
                job.save()
            except InvalidJob as e:
                built[i] = e


def _created(job: Job) -> dict[str, Any]:
    """A saved job's answer; a duplicate of a job holding its unique key has that job's id."""
    return {"message": "job deduplicated" if job.deduplicated else "job created", "id": job.id}


def _attempt(q: Queue, item: Any) -> Job | InvalidJob:
    """The job ``item`` describes, or why there is none."""
    try:
        return _build(q, item)
    except InvalidJob as e:
        return e


def _build(q: Queue, item: Any) -> Job:
    if not isinstance(item, dict):
        raise InvalidJob("a job is a JSON object with type, data and options")
    if not item.get("type"):
        raise InvalidJob("Must provide job type")
    unknown = set(item) - {"type", "data", "options"}
    if unknown:
        raise InvalidJob(f"unknown field(s): {', '.join(sorted(unknown))}")
    options = item.get("options")
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InvalidJob("options must be an object")
    job = q.create_job(item["type"], item.get("data", {}))
    for name, value in options.items():
        setter = _OPTIONS.get(name)
        if setter is None:
            known = ", ".join(sorted(_OPTIONS))
            raise InvalidJob(f"unknown option {name!r}; options are: {known}")
        setter(job, value)
    return job

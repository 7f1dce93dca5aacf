"""The options of a job's records (see :mod:`kue_core.features.records`): its tags, tracking, search
keys and retention, given before the save or changed on a saved job. Part of ``Job``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, overload

from ..base import sealing
from ..base.errors import InvalidJob
from . import pins, records
from .limits import group_name

_UNSET: Any = object()
_J = TypeVar("_J", bound="RecordOptions")


class RecordOptions:
    """Mixed into ``Job``: defaults as class attributes, so a plain job sets none of them."""

    id: int | None
    data: Any
    queue: object
    _remove_on_complete: bool
    _trace: str | None
    _stored_data: str | None
    # _records is True once any record is given before the save.
    _records = False
    _tags: list[str] | None = None
    _search_keys: list[str] | None = None
    _keep_complete: records.Keep | None = None
    _keep_failed: records.Keep | str | None = None
    _group: str | None = None
    _only: list[str] | None = None
    #: Whether the job is tracked (listed first on the dashboard's overview, with its events).
    tracked = False

    def _retag(self, what: str, tags: list[str] | None = None) -> Any:
        """``tag``, ``untag``, ``track`` or ``untrack`` this saved job now (each client's job
        does): its tags after, or whether tracking changed."""
        raise NotImplementedError

    @overload
    def remove_on_complete(self) -> bool | dict[str, int | None]: ...
    @overload
    def remove_on_complete(self: _J, policy: bool | int | dict[str, Any]) -> _J: ...
    def remove_on_complete(self, policy: Any = _UNSET) -> Any:
        """What becomes of the job once it completes: ``True`` deletes it (Kue's
        ``removeOnComplete``); a count or ``{"count": n, "age": ms}`` keeps only the newest
        ``n`` completed jobs, none older than ``age``, from then on (BullMQ's shapes); ``False``
        (default) leaves it to the queue's retention (``queue.set_retention``)."""
        if policy is _UNSET:
            kept = self._keep_complete
            return kept.to_dict() if kept is not None else self._remove_on_complete
        given = records.job_keep(policy, "remove_on_complete")
        self._remove_on_complete = given == records.REMOVE
        self._keep_complete = given if isinstance(given, records.Keep) else None
        self._records = True
        return self

    @overload
    def remove_on_fail(self) -> bool | dict[str, int | None]: ...
    @overload
    def remove_on_fail(self: _J, policy: bool | int | dict[str, Any]) -> _J: ...
    def remove_on_fail(self, policy: Any = _UNSET) -> Any:
        """As :meth:`remove_on_complete`, for when the job fails for good."""
        if policy is _UNSET:
            kept = self._keep_failed
            return kept.to_dict() if isinstance(kept, records.Keep) else kept is not None
        self._keep_failed = records.job_keep(policy, "remove_on_fail")
        self._records = True
        return self

    @overload
    def tags(self) -> list[str]: ...
    @overload
    def tags(self: _J, *tags: str) -> _J: ...
    def tags(self, *tags: Any) -> Any:
        """The tags to save the job with (``job.tags("customer:42", "vip")``); without
        arguments, the job's tags. Once saved, :meth:`tag` and :meth:`untag` change them."""
        if not tags:
            return list(self._tags or ())
        if self.id is not None:
            raise InvalidJob("a saved job's tags change with tag() and untag()")
        self._tags = records.tags(tags)
        self._records = True
        return self

    def tag(self: _J, *tags: str) -> _J:
        """Add tags (kept in order, without repeats; at most ``defaults.MAX_TAGS``)."""
        checked = records.tags(tags)
        if self.id is None:
            return self.tags(*(self._tags or ()), *checked)
        self._tags = self._retag("tag", checked)
        return self

    def untag(self: _J, *tags: str) -> _J:
        """Remove tags (those the job does not have are ignored)."""
        checked = records.tags(tags)
        if self.id is None:
            self._tags = [t for t in self._tags or () if t not in checked] or None
            return self
        self._tags = self._retag("untag", checked)
        return self

    def track(self: _J) -> _J:
        """Track the job: the dashboard's overview lists it first and shows its events live."""
        if self.id is None:
            self._records = True
        else:
            self._retag("track")
        self.tracked = True
        return self

    def untrack(self: _J) -> _J:
        """Stop tracking the job."""
        if self.id is not None:
            self._retag("untrack")
        self.tracked = False
        return self

    @overload
    def search_keys(self) -> list[str]: ...
    @overload
    def search_keys(self: _J, *names: str | list[str]) -> _J: ...
    def search_keys(self, *names: Any) -> Any:
        """Data fields whose words find the job in ``queue.search`` (Kue's ``searchKeys``),
        besides ``data.title`` and its tags; given before the save, as arguments or as one
        list (``search_keys(["email"])``, as Kue's ``searchKeys([...])``)."""
        if not names:
            return list(self._search_keys or ())
        if len(names) == 1 and isinstance(names[0], list | tuple):
            names = tuple(names[0])  # empty: refused below, as no names at all
        if self.id is not None:
            raise InvalidJob("search keys are given before the job is saved")
        self._search_keys = records.search_keys(names)
        self._records = True
        return self

    @overload
    def group(self) -> str | None: ...
    @overload
    def group(self: _J, name: str) -> _J: ...
    def group(self, name: Any = _UNSET) -> Any:
        """The group (tenant) the job is served in: claims of its type take turns between
        groups, and per-group limits apply to it (see :mod:`kue_core.features.limits`); given before
        the save."""
        if name is _UNSET:
            return self._group
        if self.id is not None:
            raise InvalidJob("a group is given before the job is saved")
        self._group = group_name(name)
        self._records = True
        return self

    @overload
    def only(self) -> list[str] | None: ...
    @overload
    def only(self: _J, workers: Iterable[str]) -> _J: ...
    def only(self, workers: Any = _UNSET) -> Any:
        """The worker processes that alone may run the job, by id (``Queue(worker_id=...)``,
        ``kue worker --id``): it waits for one of them in state ``pinned`` while the type's
        other jobs go to any worker (see :mod:`kue_core.features.pins`); given before the save."""
        if workers is _UNSET:
            return list(self._only) if self._only is not None else None
        if self.id is not None:
            raise InvalidJob("the workers a job is pinned to are given before the save")
        self._only = pins.worker_ids(workers)
        self._records = True
        return self

    def _fan_out_value(self) -> dict[str, Any] | None:
        """The fan-out entries of the records object (see kue_core.features.runs); None here."""
        return None

    def _prefer_value(self) -> list[str] | None:
        """The preferred workers of the records object (see kue_core.features.pins); None here."""
        return None

    def _words(self) -> list[str]:
        """The search words of the job's data (see ``records.data_words``): of an encrypted
        queue's job, only those of the fields its search keys name (its title is not indexed
        in clear, see kue_core.base.sealing)."""
        title = sealing.of(self.queue) is None
        return records.data_words(self.data, self._search_keys or (), title=title)

    def _extras(self) -> str:
        """The records value of the save row ('' for a plain job without a title)."""
        if (
            not self._records
            and self._trace is None
            and not (self.data.__class__ is dict and "title" in self.data)
            and self._stored_data is None
        ):
            return ""
        return records.save_extras(
            self._words(),
            self._tags,
            self._search_keys,
            self.tracked,
            self._keep_complete,
            self._keep_failed,
            self._group,
            self._only,
            self._fan_out_value(),
            self._prefer_value(),
            self._trace,
            self._stored_data,
        )

"""A task's arguments as a job's data, and its return value as the job's result.

A typed task (:mod:`kue_core.clients.tasks`) is an ordinary Kue job whose data is the call's
arguments bound to the function's parameters by name, defaults filled in, as a JSON object.
:class:`Signature` checks a call against the function's annotations before anything is
written, turns the checked values into JSON, and turns a job's data back into the arguments
the function takes (a dataclass or a pydantic model argument arrives as one).

The annotations are read by pydantic v2, which is how the Python ecosystem validates and
coerces typed data: standard types, ``Optional`` and unions, ``list[...]``/``dict[...]``,
dataclasses, TypedDicts and pydantic models, coerced as pydantic's (lax) validation does. It is
imported when a task first checks a call, so a program without tasks never loads it.
"""

from __future__ import annotations

import inspect
import threading
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.errors import InvalidJob

if TYPE_CHECKING:
    from pydantic import TypeAdapter

_EMPTY = inspect.Parameter.empty
_REFUSED = {
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


def _pydantic() -> Any:
    try:
        import pydantic
    except ImportError:  # pragma: no cover - a dependency of kue; only a broken install lacks it
        raise InvalidJob(
            "typed tasks check their arguments with pydantic v2: pip install 'pydantic>=2.7'"
        ) from None
    return pydantic


def _first_error(error: Any) -> str:
    """pydantic's first complaint, in one line: where (inside the argument) and what."""
    found = error.errors(include_url=False)
    if not found:
        return str(error)
    first = found[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{first['msg']}" + (f" (at {where})" if where else "")


class Signature:
    """The parameters of task function ``fn`` (named ``name`` in messages), checked by their
    annotations. ``*args`` and ``**kwargs`` are refused: a job's data names every argument."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.fn = fn
        self.name = name
        try:
            self._sig = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            raise InvalidJob(f"task {name}: its signature cannot be read: {e}") from None
        for p in self._sig.parameters.values():
            if p.kind in _REFUSED:
                raise InvalidJob(
                    f"task {name}: a task's arguments are its job's data, by name, so "
                    f"{_REFUSED[p.kind]} ({p.name}) cannot be one"
                )
        self._lock = threading.Lock()
        self._adapters: dict[str, TypeAdapter[Any]] | None = None
        self._result: TypeAdapter[Any] | None = None

    # -- the annotations, read once, on first use -----------------------------------------
    def _read(self) -> dict[str, TypeAdapter[Any]]:
        adapters = self._adapters
        if adapters is not None:
            return adapters
        with self._lock:
            if self._adapters is None:
                pydantic = _pydantic()
                try:
                    hints = typing.get_type_hints(self.fn, include_extras=True)
                except Exception as e:  # a name the annotations use is not defined
                    raise InvalidJob(
                        f"task {self.name}: its annotations cannot be read: {e}"
                    ) from None
                made: dict[str, TypeAdapter[Any]] = {}
                for p in self._sig.parameters.values():
                    made[p.name] = self._adapter(pydantic, hints.get(p.name, Any), p.name)
                returns = hints.get("return", Any)
                self._result = self._adapter(pydantic, returns, "return value")
                self._adapters = made
            return self._adapters

    def _adapter(self, pydantic: Any, annotation: Any, what: str) -> TypeAdapter[Any]:
        try:
            adapter: TypeAdapter[Any] = pydantic.TypeAdapter(annotation)
        except pydantic.PydanticUserError as e:
            raise InvalidJob(
                f"task {self.name}: the annotation of {what} ({annotation!r}) cannot be checked "
                f"as JSON: {str(e).splitlines()[0]}"
            ) from None
        return adapter

    def _check(self, name: str, value: Any) -> Any:
        """``value`` of parameter ``name``, validated (and coerced) by its annotation."""
        pydantic = _pydantic()
        try:
            return self._read()[name].validate_python(value)
        except pydantic.ValidationError as e:
            raise InvalidJob(f"task {self.name}: argument {name!r}: {_first_error(e)}") from None

    # -- a call, as a job's data ----------------------------------------------------------
    def data(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The job's data for the call ``fn(*args, **kwargs)``: every parameter by name,
        defaults filled in, each checked by its annotation and given as JSON. Raises
        ``InvalidJob`` naming the parameter (missing, unknown, or not fitting)."""
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise InvalidJob(f"task {self.name}: {e}") from None
        bound.apply_defaults()
        adapters = self._read()
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            checked = self._check(name, value)
            try:
                out[name] = adapters[name].dump_python(checked, mode="json")
            except Exception as e:  # a value pydantic accepts but cannot write as JSON
                raise InvalidJob(
                    f"task {self.name}: argument {name!r} cannot be written as JSON: {e}"
                ) from None
        return out

    def call(self, data: Any) -> tuple[list[Any], dict[str, Any]]:
        """The arguments (positional, keyword) to call the function with, from a job's
        ``data`` (saved by this client, over REST, by Node Kue, or by an older version of
        the code): raises ``InvalidJob`` naming the field that does not fit."""
        if not isinstance(data, dict):
            raise InvalidJob(
                f"task {self.name}: the job's data must be an object of its arguments by "
                f"name, got {type(data).__name__}"
            )
        params = self._sig.parameters
        unknown = sorted(set(data) - set(params))
        if unknown:
            raise InvalidJob(f"task {self.name}: unknown field {unknown[0]!r} in the job's data")
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for name, p in params.items():
            if name in data:
                value = self._check(name, data[name])
            elif p.default is not _EMPTY:
                value = p.default
            else:
                raise InvalidJob(f"task {self.name}: the job's data has no field {name!r}")
            if p.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(value)
            else:
                kwargs[name] = value
        return args, kwargs

    # -- the return value -----------------------------------------------------------------
    def result(self, value: Any) -> Any:
        """The function's return value as JSON, written by its return annotation (a
        dataclass or a pydantic model becomes an object)."""
        self._read()
        assert self._result is not None
        return self._result.dump_python(value, mode="json")

    def typed_result(self, stored: Any) -> Any:
        """A stored result read back as the return annotation's type."""
        pydantic = _pydantic()
        self._read()
        assert self._result is not None
        try:
            return self._result.validate_python(stored)
        except pydantic.ValidationError as e:
            raise InvalidJob(
                f"task {self.name}: the job's result does not fit the return annotation: "
                f"{_first_error(e)}"
            ) from None

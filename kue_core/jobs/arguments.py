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

A dataclass or a model instance given in a call is checked as its fields by name (its dict
form): pydantic would take an instance as it is, so ``Order(cents="lots")`` would be written
(with a warning of pydantic's on stderr) and only fail on the worker, and ``Order(cents="7")``
would be written with ``"7"``. As fields, it is refused or coerced exactly as the dict is.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..base.errors import InvalidJob

if TYPE_CHECKING:
    from pydantic import TypeAdapter

_EMPTY = inspect.Parameter.empty
_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
_POSITIONAL = (_POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
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


def _first_error(error: Any, argument: bool = True) -> str:
    """pydantic's first complaint, in one line: which argument (when ``argument``: the first
    part of where), where inside it, and what."""
    found = error.errors(include_url=False) if hasattr(error, "errors") else []
    if not found:
        return str(error)
    first = found[0]
    loc = [str(part) for part in first.get("loc", ())]
    name = f"argument {loc.pop(0)!r}: " if argument and loc else ""
    return f"{name}{first['msg']}" + (f" (at {'.'.join(loc)})" if loc else "")


#: Annotations whose checked values are JSON's own (and so need no writing as JSON).
_JSON_TYPES = (str, int, float, bool, type(None))


def _native(annotation: Any) -> bool:
    """Whether values checked by ``annotation`` are JSON's own: a str, int, float, bool or
    None, lists and string-keyed dicts of those, unions of those (``Any``: as given)."""
    if annotation is Any or annotation in _JSON_TYPES:
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, typing.Union, types.UnionType):
        return bool(args) and all(_native(a) for a in args)
    if origin is dict:
        return len(args) == 2 and args[0] is str and _native(args[1])
    return False


def _fields(value: Any, base_model: Any, on_path: frozenset[int] = frozenset()) -> Any:
    """``value`` with each dataclass and pydantic model instance in it (at any depth, in
    lists, tuples, sets and dict values) as a dict of its fields by name, for pydantic to
    check them as it checks a dict; the same object when there is none. A structure that
    contains itself is refused (it could not be JSON)."""
    if isinstance(value, (type, *_JSON_TYPES)):
        return value
    if id(value) in on_path:
        raise InvalidJob("it contains itself, so it cannot be written as JSON")
    inner = on_path | {id(value)}
    if isinstance(value, base_model):
        names = [n for n in type(value).model_fields if hasattr(value, n)]
        fields = {n: getattr(value, n) for n in names}
        fields.update(getattr(value, "__pydantic_extra__", None) or {})
        return {k: _fields(v, base_model, inner) for k, v in fields.items()}
    if dataclasses.is_dataclass(value):
        return {
            f.name: _fields(getattr(value, f.name), base_model, inner)
            for f in dataclasses.fields(value)
            if f.init and hasattr(value, f.name)
        }
    if isinstance(value, dict):
        items = {k: _fields(v, base_model, inner) for k, v in value.items()}
        same = all(items[k] is v for k, v in value.items())
        return value if same else items
    if isinstance(value, list | tuple | set | frozenset):
        each = [_fields(v, base_model, inner) for v in value]
        if all(a is b for a, b in zip(each, value, strict=True)):
            return value
        return tuple(each) if isinstance(value, tuple) else each  # a set of dicts: a list
    return value


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
        params = list(self._sig.parameters.values())
        self._names = tuple(p.name for p in params)
        self._defaults = {p.name: p.default for p in params if p.default is not _EMPTY}
        self._positional = tuple(p.name for p in params if p.kind in _POSITIONAL)
        self._only_positional = frozenset(p.name for p in params if p.kind is _POSITIONAL_ONLY)
        self._lock = threading.Lock()
        self._args: TypeAdapter[Any] | None = None  # of the arguments by name, as a TypedDict
        self._native = False  # every annotation checks for values JSON has as they are
        self._instances: tuple[str, ...] = ()  # parameters whose values may hold instances
        self._base_model: Any = object
        self._result: TypeAdapter[Any] | None = None

    # -- the annotations, read once, on first use -----------------------------------------
    def _read(self) -> TypeAdapter[Any]:
        adapter = self._args
        if adapter is not None:
            return adapter
        with self._lock:
            if self._args is None:
                pydantic = _pydantic()
                try:
                    hints = typing.get_type_hints(self.fn, include_extras=True)
                except Exception as e:  # a name the annotations use is not defined
                    raise InvalidJob(
                        f"task {self.name}: its annotations cannot be read: {e}"
                    ) from None
                fields = {name: hints.get(name, Any) for name in self._names}
                for name, annotation in fields.items():  # each alone: an error names it
                    self._adapter(pydantic, annotation, repr(name))
                self._result = self._adapter(pydantic, hints.get("return", Any), "return value")
                import typing_extensions  # pydantic's own dependency; its TypedDict it reads

                made = typing_extensions.TypedDict  # a class made at run time, from fields
                shape = made(f"{self.name} arguments", fields)  # type: ignore[operator]
                self._native = all(_native(annotation) for annotation in fields.values())
                self._instances = tuple(n for n, a in fields.items() if not _native(a))
                self._base_model = pydantic.BaseModel
                self._args = self._adapter(pydantic, shape, "the arguments")
            return self._args

    def _adapter(self, pydantic: Any, annotation: Any, what: str) -> TypeAdapter[Any]:
        try:
            adapter: TypeAdapter[Any] = pydantic.TypeAdapter(annotation)
        except pydantic.PydanticUserError as e:
            raise InvalidJob(
                f"task {self.name}: the annotation of {what} ({annotation!r}) cannot be checked "
                f"as JSON: {str(e).splitlines()[0]}"
            ) from None
        return adapter

    def _check(self, values: dict[str, Any], given: bool = True) -> dict[str, Any]:
        """``values`` (every parameter by name; ``given`` in a call, else read from JSON),
        validated and coerced by the annotations: raises ``InvalidJob`` naming the first
        argument that does not fit."""
        adapter = self._read()
        for name in (
            self._instances if given else ()
        ):  # as their fields: pydantic takes an instance as it is
            if name in values:
                try:
                    values[name] = _fields(values[name], self._base_model)
                except InvalidJob as e:
                    raise InvalidJob(f"task {self.name}: argument {name!r}: {e}") from None
        try:
            checked: dict[str, Any] = adapter.validate_python(values)
        except Exception as e:
            raise InvalidJob(f"task {self.name}: {_first_error(e)}") from None
        return checked

    def _bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The call's arguments by name, defaults filled in. A call Python would refuse is
        refused with Python's words (``inspect``'s binding says them)."""
        if len(args) <= len(self._positional):
            out = dict(zip(self._positional, args, strict=False))
            for name, value in kwargs.items():
                if name in out or name in self._only_positional or name not in self._names:
                    break
                out[name] = value
            else:
                if len(out) == len(self._names):
                    return out
                for name in self._names:
                    if name not in out:
                        if name not in self._defaults:
                            break
                        out[name] = self._defaults[name]
                else:
                    return out
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise InvalidJob(f"task {self.name}: {e}") from None
        bound.apply_defaults()  # not reached for a call Python takes, but to be whole
        return dict(bound.arguments)

    # -- a call, as a job's data ----------------------------------------------------------
    def data(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The job's data for the call ``fn(*args, **kwargs)``: every parameter by name,
        defaults filled in, each checked by its annotation and given as JSON. Raises
        ``InvalidJob`` naming the parameter (missing, unknown, or not fitting)."""
        checked = self._check(self._bind(args, kwargs))
        if self._native:  # checked, they are JSON's own values (save() says if one is not)
            return checked
        try:
            out: dict[str, Any] = self._read().dump_python(checked, mode="json")
        except Exception as e:  # a value pydantic accepts but cannot write as JSON
            raise InvalidJob(
                f"task {self.name}: an argument cannot be written as JSON: {e}"
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
        unknown = sorted(set(data) - set(self._names))
        if unknown:
            raise InvalidJob(f"task {self.name}: unknown field {unknown[0]!r} in the job's data")
        values = {}
        for name in self._names:
            if name in data:
                values[name] = data[name]
            elif name in self._defaults:
                values[name] = self._defaults[name]
            else:
                raise InvalidJob(f"task {self.name}: the job's data has no field {name!r}")
        checked = self._check(values, given=False)
        args = [checked.pop(name) for name in self._positional if name in self._only_positional]
        return args, checked

    # -- the return value -----------------------------------------------------------------
    def result(self, value: Any) -> Any:
        """The function's return value as JSON, checked (and coerced) by its return
        annotation as an argument is, a dataclass or a model instance as its fields: raises
        ``InvalidJob`` naming what does not fit, rather than writing it with a warning."""
        pydantic = _pydantic()
        self._read()
        assert self._result is not None
        try:
            checked = self._result.validate_python(_fields(value, self._base_model))
            return self._result.dump_python(checked, mode="json", warnings="error")
        except InvalidJob as e:
            raise InvalidJob(f"task {self.name}: the return value: {e}") from None
        except pydantic.ValidationError as e:
            raise InvalidJob(
                f"task {self.name}: the return value does not fit the return annotation: "
                f"{_first_error(e, argument=False)}"
            ) from None
        except Exception as e:  # a value pydantic accepts but cannot write as JSON
            raise InvalidJob(
                f"task {self.name}: the return value cannot be written as JSON: {e}"
            ) from None

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
                f"{_first_error(e, argument=False)}"
            ) from None

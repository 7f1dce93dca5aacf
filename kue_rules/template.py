"""Resc's templates: ``${name}`` and ``${name.field.sub}`` in a string, checked when the
configuration loads (every name must be a variable the rule has) and filled per event.

A variable is a named group of the rule's ``on`` (a string), ``input_task`` (the event), the
name a ``fetch`` returns (its JSON answer, or one element of it when the answer is an array)
and, for a watcher on job events, ``type``, ``id``, ``data`` and ``result``. Values that are
not strings are written as JSON (``12``, ``true``, ``null``, ``{"a":1}``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kue_core import KueError

#: One placeholder: ``${`` a name, then ``.field`` parts, ``}``.
_PLACEHOLDER = re.compile(r"\$\{([^{}]*)\}")
_PATH = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*\Z")

#: What a variable holds, for the checks made at load: a string (no fields) or JSON.
TEXT, JSON = "text", "json"


class TemplateError(KueError):
    """A template names a variable the rule does not have, or cannot be filled."""


class Template:
    """A string with placeholders. ``render(variables)`` fills it."""

    def __init__(self, text: str, known: Mapping[str, str]) -> None:
        self.text = text
        self.paths: list[list[str]] = []
        for m in _PLACEHOLDER.finditer(text):
            path = m.group(1).strip()
            if not _PATH.match(path):
                raise TemplateError(f"{m.group(0)!r} in {text!r} is not a ${{name}} placeholder")
            parts = path.split(".")
            kind = known.get(parts[0])
            if kind is None:
                names = ", ".join(sorted(known)) or "none"
                raise TemplateError(
                    f"{m.group(0)} in {text!r}: no variable {parts[0]!r} (this rule has: {names})"
                )
            if kind == TEXT and len(parts) > 1:
                raise TemplateError(
                    f"{m.group(0)} in {text!r}: {parts[0]} is text, it has no fields"
                )
            self.paths.append(parts)
        rest = _PLACEHOLDER.sub("", text)
        if "${" in rest:
            raise TemplateError(f"{text!r} has a '${{' that does not close")
        #: The whole text is one placeholder: a job's data may take the value itself.
        self.whole = bool(self.paths) and _PLACEHOLDER.fullmatch(text) is not None

    def render(self, variables: Mapping[str, Any]) -> str:
        """The text with each placeholder filled; ``TemplateError`` when a field is missing."""
        if not self.paths:
            return self.text
        return _PLACEHOLDER.sub(lambda m: text_of(lookup(variables, m.group(1).strip())), self.text)

    def value(self, variables: Mapping[str, Any]) -> Any:
        """As :meth:`render`, but a template that is one placeholder gives the value itself
        (a number, an object) rather than its text."""
        if self.whole:
            return lookup(variables, self.paths[0])
        return self.render(variables)

    def __repr__(self) -> str:
        return f"Template({self.text!r})"


def lookup(variables: Mapping[str, Any], path: str | list[str]) -> Any:
    """The value at ``path`` (``"child.processId"`` or its parts) in ``variables``."""
    parts = path.split(".") if isinstance(path, str) else path
    value: Any = variables[parts[0]]
    for i, part in enumerate(parts[1:], 1):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            where = ".".join(parts[:i])
            raise TemplateError(f"${{{'.'.join(parts)}}}: {where} has no field {part!r}")
    return value


def text_of(value: Any) -> str:
    """A variable's value as it goes into a string: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Tree:
    """A JSON value whose strings are templates (a job's ``data``): filled as a whole."""

    def __init__(self, value: Any, known: Mapping[str, str]) -> None:
        self.value = _compile(value, known)

    def render(self, variables: Mapping[str, Any]) -> Any:
        return _fill(self.value, variables)


def _compile(value: Any, known: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return Template(value, known)
    if isinstance(value, dict):
        return {k: _compile(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [_compile(v, known) for v in value]
    return value


def _fill(value: Any, variables: Mapping[str, Any]) -> Any:
    if isinstance(value, Template):
        return value.value(variables)
    if isinstance(value, dict):
        return {k: _fill(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, variables) for v in value]
    return value

"""Just enough of a Lua reader for the tests of the scripts' text: a file without its
comments and strings (same length, same lines) and its functions' spans and parameters."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A comment, a string (quoted, or long), a name or one other character.
_TOKEN = re.compile(
    r"--\[(=*)\[.*?\]\1\]|--[^\n]*|\[(=*)\[.*?\]\2\]|'(?:\\.|[^'\\\n])*'"
    r"|\"(?:\\.|[^\"\\\n])*\"|[A-Za-z_]\w*|\S",
    re.S,
)
#: The words that open a block closed by ``end`` (``for`` and ``while`` open theirs with
#: ``do``) or by ``until``.
_OPENS = {"function", "if", "do", "repeat"}
_CLOSES = {"end", "until"}


def code_of(text: str) -> str:
    """``text`` with its comments blanked and each string literal's inside blanked (its
    quotes stay): offsets and line numbers are those of ``text``."""
    out = list(text)
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token.startswith("--"):
            first = m.start()
        elif token[0] in "'\"[" and len(token) > 1:
            first = m.start() + 1
        else:
            continue
        for i in range(first, m.end() - (0 if token.startswith("--") else 1)):
            if out[i] != "\n":
                out[i] = " "
    return "".join(out)


@dataclass(frozen=True)
class Function:
    """A function of a Lua file: its name (``<anon>`` for a function value, ``<body>`` for
    the file's top level), its parameters, its span in the file, and how deep it nests."""

    name: str
    params: tuple[str, ...]
    start: int
    end: int
    depth: int


def functions(code: str) -> list[Function]:
    """Every function of ``code`` (as :func:`code_of` gives it), the top level first."""
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(code)]
    found = [Function("<body>", (), 0, len(code), 0)]
    stack: list[tuple[str, tuple[str, tuple[str, ...], int] | None]] = []
    i = 0
    while i < len(tokens):
        word, at = tokens[i]
        if word == "function":
            j = i + 1
            name = ""
            while tokens[j][0] != "(":
                name += tokens[j][0]
                j += 1
            k = j + 1
            params: list[str] = []
            while tokens[k][0] != ")":
                if tokens[k][0] != ",":
                    params.append(tokens[k][0])
                k += 1
            stack.append(("function", (name or "<anon>", tuple(params), at)))
            i = k + 1
            continue
        if word in _OPENS:
            stack.append((word, None))
        elif word in _CLOSES:
            kind, info = stack.pop()
            if kind == "function" and info is not None:
                depth = 1 + sum(1 for k, _ in stack if k == "function")
                found.append(Function(info[0], info[1], info[2], at + len(word), depth))
        i += 1
    assert not stack, "unbalanced blocks"
    return found


def innermost(funcs: list[Function], at: int) -> Function:
    """The innermost function of ``funcs`` whose span holds offset ``at``."""
    return max((f for f in funcs if f.start <= at < f.end), key=lambda f: f.depth)


def line_of(code: str, at: int) -> int:
    return code.count("\n", 0, at) + 1

"""The scripts' helpers in parts (``kue_core/scripts/lib/``): every part is joined, in an
order where each helper comes after the helpers it calls, and each is defined once."""

from __future__ import annotations

import re
from pathlib import Path

import kue_core
from kue_core.store import lua_source

LIB = Path(kue_core.__file__).parent / "scripts" / "lib"
DEFINED = re.compile(r"^local (?:function )?([A-Za-z_]\w*)", re.M)
COMMENT = re.compile(r"--[^\n]*")
STRING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def test_every_part_is_joined_and_only_those() -> None:
    assert sorted(p.stem for p in LIB.glob("*.lua")) == sorted(lua_source.LIB_PARTS)
    assert lua_source.lib_text() == "".join(
        (LIB / f"{part}.lua").read_text("utf-8") for part in lua_source.LIB_PARTS
    )


def test_each_helper_is_defined_once_and_after_those_it_calls() -> None:
    """A Lua local is seen only below its definition: a helper that calls one defined later
    would call a global, nil at run time."""
    text = lua_source.lib_text()
    starts = list(DEFINED.finditer(text))
    names = [m.group(1) for m in starts]
    assert len(names) == len(set(names)), "a helper defined twice"
    order = {name: i for i, name in enumerate(names)}
    ends = [m.start() for m in starts[1:]] + [len(text)]
    late = []
    for i, (m, end) in enumerate(zip(starts, ends, strict=True)):
        body = STRING.sub("", COMMENT.sub("", text[m.end() : end]))
        used = set(re.findall(r"[A-Za-z_]\w*", body))
        late += [f"{m.group(1)} calls {u}" for u in used if order.get(u, -1) > i]
    assert late == []

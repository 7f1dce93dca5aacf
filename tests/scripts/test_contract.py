"""The Lua files and their Python wrappers match, and every script states its contract."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from kue_core import Queue, defaults
from kue_core.doctor import functions as doctor_functions
from kue_core.store import calls, lua_source
from kue_core.store.lua_source import (
    LIB_PARTS,
    LIB_TAIL,
    LUA_CONSTANTS,
    LUA_FIELDS,
    REPAIR_WIDTH,
    SAVE_WIDTH,
    SCRIPT_NAMES,
    field_indexes,
    function_library,
    lib_text,
    lua_constants,
    lua_preamble,
    script_source,
)

FOLDER = resources.files("kue_core") / "scripts"


def _lua_files() -> list[Any]:
    """Every Lua file: the scripts and the parts of their helpers (``scripts/lib/``)."""
    found = [p for p in FOLDER.iterdir() if p.name.endswith(".lua")]
    return found + [p for p in (FOLDER / "lib").iterdir() if p.name.endswith(".lua")]


def test_every_lua_file_has_a_wrapper_and_back() -> None:
    """Each script is called through its builder of ``kue_core.store.calls`` (what either
    transport runs)."""
    files = {p.name[:-4] for p in FOLDER.iterdir() if p.name.endswith(".lua")}
    assert files == set(SCRIPT_NAMES)
    for name in SCRIPT_NAMES:
        assert callable(getattr(calls, name, None)), name


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_header_contract(name: str) -> None:
    text = (FOLDER / f"{name}.lua").read_text("utf-8")
    header = text.split("\nlocal ", 1)[0]
    assert header.startswith(f"-- {name}:")
    for part in ("KEYS[1]", "ARGV[1]", "Returns", "Events", "Uses"):
        assert part in header, f"{name}.lua header lacks {part}"


# -- what a script uses: its header's Uses line, and what the loader pulls ------------------
#: A part of the Uses line: ``lib/<part> (name, name, ...)``.
_USES_ITEM = re.compile(r"lib/(\w+) \(([^)]*)\)(?:, |$)")
_TOP_LOCAL = re.compile(r"^local (?:function )?([A-Za-z_]\w*)", re.M)


def _uses(header: str) -> dict[str, set[str]]:
    """The Uses entry of a header (its line and those continuing it), as part -> names."""
    lines = header.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith("-- Uses ")]
    text = lines[start][len("-- Uses ") :].strip()
    for line in lines[start + 1 :]:
        if not re.match(r"--\s{9,}\S", line):
            break
        text += " " + line[2:].strip()
    items = _USES_ITEM.findall(text)
    assert "".join(f"lib/{p} ({n}), " for p, n in items)[:-2] == text, "malformed: " + text
    return {part: {n.strip() for n in names.split(",")} for part, names in items}


def _lib_parts() -> tuple[dict[str, str], dict[str, str], str]:
    """Each helper's part (name -> part) and definition (name -> text), and the fence's read,
    the code every script runs first."""
    owner: dict[str, str] = {}
    for part in LIB_PARTS:
        text = (FOLDER / "lib" / f"{part}.lua").read_text("utf-8")
        tail = LIB_TAIL.search(text)
        for local in _TOP_LOCAL.findall(text[: tail.start()] if tail else text):
            owner.setdefault(local, part)
    lib = lib_text()
    tail_at = LIB_TAIL.search(lib).start()  # type: ignore[union-attr]
    starts = list(_TOP_LOCAL.finditer(lib[:tail_at]))
    ends = [m.start() for m in starts[1:]] + [tail_at]
    defined = {m.group(1): lib[m.start() : e] for m, e in zip(starts, ends, strict=True)}
    return owner, defined, lib[tail_at:]


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_header_names_the_helpers_the_script_calls(name: str) -> None:
    """The Uses line names each part of ``scripts/lib/`` whose helpers (or values) the
    script's own text names, with those names: ``git grep`` finds the scripts a helper's
    change touches. With the fence's read (every script runs it) they account for all the
    loader pulls in: what they call, transitively, and nothing else."""
    text = (FOLDER / f"{name}.lua").read_text("utf-8")
    uses = _uses(text.split("\nlocal ", 1)[0])
    owner, defined, fence = _lib_parts()
    direct: dict[str, set[str]] = {}
    for word in set(re.findall(r"[A-Za-z_]\w*", _code(text))) & set(owner):
        direct.setdefault(owner[word], set()).add(word)
    assert uses == direct, f"{name}.lua: Uses should be {direct}"
    assert list(uses) == [p for p in LIB_PARTS if p in uses], "parts in LIB_PARTS's order"
    wanted: set[str] = set()
    todo = set().union(*uses.values()) | set(re.findall(r"[A-Za-z_]\w*", _code(fence)))
    while todo:
        word = todo.pop()
        if word in defined and word not in wanted:
            wanted.add(word)
            todo |= set(re.findall(r"[A-Za-z_]\w*", _code(defined[word])))
    source = script_source(name)
    definitions = source[: LIB_TAIL.search(source).start()]  # type: ignore[union-attr]
    pulled = set(_TOP_LOCAL.findall(definitions)) - set(_preamble_values())
    assert pulled == wanted


def test_scripts_are_loaded_once_per_client(queue, r) -> None:  # type: ignore[no-untyped-def]
    queue.create_job("t").save()
    before = r.info("commandstats").get("cmdstat_script", {}).get("calls", 0)
    for _ in range(5):
        queue.create_job("t").save()
    after = r.info("commandstats").get("cmdstat_script", {}).get("calls", 0)
    assert after == before
    assert "local function now_ms" in script_source("save")


# -- constants: kue_core/defaults.py is their one source ------------------------------------
def _code(lua: str) -> str:
    """Lua text without its comments and string literals."""
    lua = re.sub(r"--[^\n]*", "", lua)
    return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", lua)


def _preamble_values() -> dict[str, str]:
    return dict(re.findall(r"^local ([A-Z][A-Z0-9_]*) = (.+)$", lua_preamble(), re.M))


def test_every_constant_a_script_uses_comes_from_the_defaults() -> None:
    preamble = _preamble_values()
    fields = {f"{name}_{index}" for name in LUA_FIELDS for index in field_indexes(name)}
    assert set(preamble) == {*LUA_CONSTANTS, "SAVE_WIDTH", "REPAIR_WIDTH", *fields}
    used: set[str] = set()
    defined: set[str] = set()
    for path in _lua_files():
        if path.name.endswith(".lua"):
            code = _code(path.read_text("utf-8"))
            used |= set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", code)) - {"KEYS", "ARGV"}
            defined |= set(re.findall(r"\blocal\s+([A-Z][A-Z0-9_]+)\s*=", code))
            # No number kept as a constant in Lua: a copy of a default would drift from it.
            literal = re.findall(r"\blocal\s+([A-Z][A-Z0-9_]+)\s*=\s*\{?\s*-?\d", code)
            assert not literal, f"{path.name} defines {literal}: put them in defaults.py"
    assert used - defined <= set(preamble), "constants used but not defined"
    assert set(preamble) <= used, "constants defined but not used"
    assert defined.isdisjoint(preamble)


def test_the_preamble_holds_the_defaults_values() -> None:
    preamble = _preamble_values()
    expected = {name: getattr(defaults, name) for name in LUA_CONSTANTS}
    expected |= {"SAVE_WIDTH": SAVE_WIDTH, "REPAIR_WIDTH": REPAIR_WIDTH}
    assert lua_constants() == expected
    for name, value in lua_constants().items():
        if isinstance(value, tuple):
            assert preamble[name] == "{ " + ", ".join(map(str, value)) + " }"
        else:
            assert preamble[name] == str(value)
    lines = set(lua_preamble().splitlines())
    for name in SCRIPT_NAMES:
        source = script_source(name)
        assert source.startswith(lua_preamble().splitlines()[0])
        constants = [
            line
            for line in source.splitlines()
            if line.startswith("local ") and line.split()[1] in preamble
        ]
        assert set(constants) <= lines  # the preamble's values, where a script uses them


def test_each_script_defines_the_helpers_it_uses_and_no_others() -> None:
    """A script carries the helpers (and constants) it reaches, and only those: Redis runs
    the whole text on every call."""
    lib = lib_text()
    helpers = set(re.findall(r"^local (?:function )?([A-Za-z_]\w*)", lib + lua_preamble(), re.M))
    for name in SCRIPT_NAMES:
        source = script_source(name)
        defined = set(re.findall(r"^local (?:function )?([A-Za-z_]\w*)", source, re.M))
        used = set(re.findall(r"[A-Za-z_]\w*", _code(source)))
        assert used & helpers <= defined, f"{name}.lua uses helpers it does not carry"
    assert "save_records" not in script_source("claim") and "claim" in script_source("complete")
    assert "local function k_fence" in script_source("pause")  # the fence read: every script


@pytest.mark.parametrize("part", LIB_PARTS)
def test_each_lib_part_names_the_parts_it_calls(part: str) -> None:
    """A part of ``scripts/lib/`` starts with its Uses line: the other parts whose helpers (or
    values) its code names, each one joined before it (a helper comes after those it
    calls)."""
    text = (FOLDER / "lib" / f"{part}.lua").read_text("utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("-- Uses     "), f"lib/{part}.lua starts without its Uses line"
    listed = lines[0][len("-- Uses     ") :]
    for line in lines[1:]:
        if not re.match(r"--\s{9,}\S", line):
            break
        listed += " " + line[2:].strip()
    owner, _, _ = _lib_parts()
    calls = {owner[w] for w in re.findall(r"[A-Za-z_]\w*", _code(text)) if w in owner} - {part}
    before = list(LIB_PARTS)[: list(LIB_PARTS).index(part)]
    expected = ", ".join(f"lib/{p}" for p in before if p in calls) or "no other part"
    assert listed == expected
    assert calls <= set(before), f"lib/{part}.lua calls parts joined after it"


def test_the_preamble_numbers_each_field_list() -> None:
    """Each field of a list of LUA_FIELDS has a constant: its position."""
    preamble = _preamble_values()
    for name, fields in LUA_FIELDS.items():
        positions = {index: int(preamble[f"{name}_{index}"]) for index in field_indexes(name)}
        assert sorted(positions.values()) == list(range(1, len(fields) + 1))
    at = LUA_FIELDS["COMPLETE"].index("removeOnComplete") + 1
    assert field_indexes("COMPLETE")["REMOVE_ON_COMPLETE"] == at


@pytest.mark.parametrize("field", ["a'b", "x y", "1x", ""])
def test_only_plain_names_become_field_lists(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LUA_FIELDS, "COMPLETE", ("state", field))
    with pytest.raises(ValueError, match="field"):
        lua_preamble()


@contextlib.contextmanager
def _unloaded_after(queue: Queue) -> Iterator[None]:
    """Delete the function libraries (Redis 7) made with the constants of now, once done:
    kue doctor would take them for another version's."""
    names = [function_library(name).name for name in SCRIPT_NAMES]
    try:
        yield
    finally:
        if queue.scripts.functions:
            doctor_functions.unload(queue.client, names)


@pytest.mark.parametrize("bad", [1.5, True, 2**53, "50", (1, "2"), None])
def test_only_integers_become_lua_constants(bad: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defaults, "HISTORY_LENGTH", bad)
    with pytest.raises(TypeError, match="HISTORY_LENGTH"):
        lua_preamble()


def test_scripts_run_with_the_defaults_values(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed default reaches the scripts of a queue made afterwards: no copy in Lua."""
    monkeypatch.setattr(defaults, "HISTORY_LENGTH", 7)
    monkeypatch.setattr(defaults, "DURATION_BUCKETS_MS", (1, 2, 3))
    with Queue(redis_url, prefix=prefix) as queue, _unloaded_after(queue):
        job = queue.create_job("t").save()
        for _ in range(10):
            job.set_state("failed")
            job.set_state("inactive")
        assert len(queue.history(job.id)) == 7
        assert queue.history(job.id)[-1]["from"] == "failed"
        claimed = queue.scripts.call(calls.claim(queue.keys, "t", "w", 60_000))
        assert isinstance(claimed, tuple)
        queue.scripts.call(
            calls.complete(queue.keys, claimed[0], claimed[1]["lease"], "null", None)
        )
        buckets = {k for k in queue.client.hkeys(queue.keys.totals) if k.startswith("le:")}
        assert buckets <= {"le:1", "le:2", "le:3", "le:inf"} and buckets


def test_lib_keeps_no_state_between_calls() -> None:
    """On Redis 7 a script runs as a function whose library (the helpers) is loaded once, so
    the helpers' top-level values outlive a call: each is a constant (upper case, and no
    script writes into it) or per-call state that the ``fence`` part, which every call runs
    first, sets afresh (its ``forget_call``)."""
    lib = lib_text()
    values = re.findall(r"^local (?!function )([A-Za-z_]\w*)", _code(lib), re.M)
    tail = lib[LIB_TAIL.search(lib).start() :]  # type: ignore[union-attr]
    assert tail.startswith("forget_call()")
    forget = re.search(r"^local function forget_call\(\)\n(.*?)^end", lib, re.M | re.S)
    assert forget is not None
    tail = "\n".join(line.strip() for line in forget.group(1).splitlines())
    for name in values:
        if name.isupper():
            for path in _lua_files():
                if path.name.endswith(".lua"):
                    code = _code(path.read_text("utf-8"))
                    assert not re.search(rf"(?<!local )\b{name}\s*(\[[^\]]*\]\s*)?=[^=]", code), (
                        name
                    )
        else:
            assert re.search(rf"^{name} = ", tail, re.M), f"{name}: set it in lib/fence.lua"


#: Lua 5.1's bound on the upvalues of one function (LUAI_MAXUPVALUES in Redis's Lua).
MOST_UPVALUES = 60


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_a_function_closes_over_at_most_60_of_its_library(name: str) -> None:
    """As a Redis function (Redis 7), a script's body is a closure over the library's helpers
    it names, and ``KEYS`` and ``ARGV``: past Lua's 60 upvalues ``FUNCTION LOAD`` refuses the
    library ("has more than 60 upvalues"), which only a Redis 7 run would find. Counted here
    from the text, on any server: each helper named in the body (a name the body defines for
    itself counts too, so the count can only be high)."""
    definitions, body = lua_source._parts_for(name, lua_source.lua_preamble())
    helpers = {local for local, _ in lua_source._locals(definitions)}
    named = set(re.findall(r"[A-Za-z_]\w*", _code(body))) & helpers
    assert len(named | {"KEYS", "ARGV"}) <= MOST_UPVALUES, sorted(named)

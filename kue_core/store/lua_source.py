"""The Lua text of the transition scripts: the constants from :mod:`kue_core.defaults`, the
helpers of ``scripts/lib/`` each script uses, and the script's own file (in ``scripts/``); sent as
a script (``EVAL``) or, on Redis 7 and later, as a library of one Redis function."""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from .. import defaults

#: Every transition script; ``tests/scripts/test_contract.py`` checks this against the files.
SCRIPT_NAMES = (
    "save",
    "save_unique",
    "update",
    "set_state",
    "set_priority",
    "progress",
    "log",
    "stream",
    "suspend",
    "signal",
    "step",
    "remove",
    "cancel",
    "move",
    "pin",
    "edit",
    "reseal",
    "claim",
    "claim_batch",
    "complete",
    "complete_batch",
    "fail",
    "release",
    "heartbeat",
    "recover",
    "promote",
    "pause",
    "resume",
    "limit",
    "feed",
    "bulk",
    "inspect",
    "screen",
    "repair",
    "tag",
    "search",
    "finished",
    "retain",
    "flow",
    "unblock",
    "schedule",
    "tick",
    "sample",
)

#: The parts of the scripts' helpers (``scripts/lib/<part>.lua``), in the order they are
#: joined: a helper comes after those it calls. What each holds:
LIB_PARTS = {
    "base": "the server's clock, integers, the states",
    "keys": "key names (mirroring kue_core/base/keys.py)",
    "members": "zset members and scores of jobs",
    "type_rules": "a type's rules in <p>:limits (limits, pause, groups, feeds), groups",
    "pins": "jobs pinned to workers, and the places they wait in",
    "indexes": "a job into and out of its state's sets",
    "events": "events, history, the save entry",
    "attempts": "loading a job, attempts, leaving active, outcome counters",
    "unique": "unique keys",
    "deps": "dependencies: unblocking, a dependency's end told to its dependents",
    "runs": "fan-out runs, and telling a worker to stop an attempt",
    "moves": "moving a job between states",
    "records": "words, tags and the records saved with a job",
    "payloads": "the values of a job in the payload store, and their trash",
    "retention": "deleting jobs, and keeping the newest",
    "finishing": "completion and failure of jobs and runs",
    "signals": "jobs suspended waiting for a signal, and their resumption",
    "saving": "saving jobs, unique ones too",
    "limits": "rate and concurrency waits",
    "places": "the places of pinned and fan-out jobs",
    "taking": "claiming one member of a type's set: under rules, pinned, fan-out, or plain",
    "claims": "claiming jobs (in groups, pinned, late joiners, several at once), the next one",
    "fence": "the code every call runs first: the Cluster fence, the per-call state",
}

#: Values per job in a ``save`` call (see the header of ``save.lua``).
SAVE_WIDTH = 10

#: Values per action in a ``repair`` call (see the header of ``repair.lua``).
REPAIR_WIDTH = 4

#: The job fields a loader on the hot path reads (its ``HMGET`` lists them in this order; a
#: test checks it), by list name. A helper handed them reads ``h[COMPLETE_FAN_OUT]``: the
#: preamble defines ``<NAME>_<FIELD>``, the field's position (``removeOnComplete`` as
#: ``REMOVE_ON_COMPLETE``), so that one list says which position is which field. Elsewhere
#: loaders give tables of named fields; here a 16-field table per call cost 1.5% of Redis's
#: instructions per job drained (``bench/instructions.py``), and ``unpack`` of a list 0.5%; a
#: constant, nothing.
LUA_FIELDS: dict[str, tuple[str, ...]] = {
    # lib/finishing.lua's load_for_complete: every completion. Each field asked for costs
    # Redis a look through the job's hash (a field it lacks, the whole hash) and Lua a value:
    # unique_mode (for a job with a unique key) and workerId (for a completion that writes a
    # history entry) are read where needed, by the few completions that need them.
    "COMPLETE": (
        "state",
        "lease",
        "type",
        "priority",
        "started_at",
        "removeOnComplete",
        "attempts",
        "max_attempts",
        "unique",
        "keep_complete",
        "dependents",
        "group",
        "fan_out",
        "trail",
    ),
}


#: The values of :mod:`kue_core.defaults` the scripts use. Each becomes a Lua ``local`` of the
#: same name ahead of the helpers (as do :data:`SAVE_WIDTH` and :data:`REPAIR_WIDTH`), so
#: that Python and Lua read one value; the Lua files keep no copy (a test checks it).
LUA_CONSTANTS = (
    "MAX_ATTEMPTS",
    "SIGNAL_FOREVER",
    "HISTORY_LENGTH",
    "HISTORY_ERROR_LENGTH",
    "DURATION_BUCKETS_MS",
    "MINUTE_COUNTER_TTL",
    "RESUMED_SIGNAL_MS",
    "EVENTS_UNASKED",
    "LIMIT_WAKE_MAX",
    "LIMIT_RECHECK_MS",
    "GROUP_SCAN",
    "LANE_SCAN",
    "CLAIM_CHUNK",
    "RETAIN_COMPLETE",
    "RETAIN_FAILED",
    "RETIRE_BATCH",
    "MAX_TAGS",
    "SEARCH_PREFIX_WORDS",
    "OPEN_SCAN",
    "LATE_SCAN",
    "MAX_PINS",
    "FINISHED_SCAN",
    "FINISHED_CHUNK",
)

_LUA_NAME = re.compile(r"[A-Z][A-Z0-9_]*\Z")


def lua_constants() -> dict[str, object]:
    """Name -> value of every constant the preamble defines, as they are now."""
    values: dict[str, object] = {name: getattr(defaults, name) for name in LUA_CONSTANTS}
    values["SAVE_WIDTH"] = SAVE_WIDTH
    values["REPAIR_WIDTH"] = REPAIR_WIDTH
    return values


def _lua_integer(name: str, value: object) -> str:
    """An integer as Lua source; anything else is refused (a Lua number is exact below 2**53)."""
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**53:
        raise TypeError(
            name + " must be an integer below 2**53, or a tuple of them, to be a Lua "
            "constant; got " + repr(value)
        )
    return str(int(value))


def lua_preamble() -> str:
    """``local NAME = value`` for each of :func:`lua_constants`, numbers or tuples of numbers
    only (written out by this function, never from text given to it), then the index
    constants of :data:`LUA_FIELDS`."""
    lines = ["-- Constants from kue_core/defaults.py, written by kue_core/store/lua_source.py."]
    for name, value in lua_constants().items():
        if not _LUA_NAME.match(name):
            raise ValueError("not a Lua constant name: " + repr(name))
        if isinstance(value, tuple):
            text = "{ " + ", ".join(_lua_integer(name, v) for v in value) + " }"
        else:
            text = _lua_integer(name, value)
        lines.append("local " + name + " = " + text)
    for name in LUA_FIELDS:
        lines += [f"local {name}_{index} = {i}" for index, i in field_indexes(name).items()]
    return "\n".join(lines) + "\n"


_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _lua_field(field: str) -> str:
    """A hash field's name, checked to be a plain name before it goes into Lua text."""
    if not _FIELD.match(field):
        raise ValueError("not a plain field name: " + repr(field))
    return field


def field_indexes(name: str) -> dict[str, int]:
    """The index constants of :data:`LUA_FIELDS`'s list ``name``: ``FIELD`` (upper case,
    ``removeOnComplete`` as ``REMOVE_ON_COMPLETE``) -> its position in the list, from 1."""
    out: dict[str, int] = {}
    for i, field in enumerate(LUA_FIELDS[name], 1):
        upper = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", _lua_field(field)).upper()
        if not _LUA_NAME.match(name + "_" + upper) or upper in out:
            raise ValueError(f"{name}: field {field!r} makes no new constant")
        out[upper] = i
    return out


#: A top-level ``local`` of the helpers or the preamble (a function or a value), and a Lua name.
_TOP_LOCAL = re.compile(r"^local (?:function )?([A-Za-z_]\w*)", re.M)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
#: A Lua comment to the end of its line, or a quoted string (the scripts have no long
#: strings): names in either are not uses. One pattern, so that a quote in a comment, or
#: "--" in a string, is read as Lua reads it.
_NOT_CODE = re.compile(r"--[^\n]*|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"")
#: Where the code every script runs (``lib/fence.lua``: the per-call state, then the Cluster
#: fence read) begins: the first top-level line that is not a definition.
LIB_TAIL = re.compile(r"^forget_call\(\)", re.M)


def _locals(text: str) -> list[tuple[str, str]]:
    """``text`` (top-level ``local`` definitions, with comments) cut into (name, definition)
    pairs, in order; each definition runs to the next one."""
    starts = list(_TOP_LOCAL.finditer(text))
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return [(m.group(1), text[m.start() : end]) for m, end in zip(starts, ends, strict=True)]


@functools.lru_cache(maxsize=4 * len(SCRIPT_NAMES))
def _parts_for(name: str, preamble: str) -> tuple[str, str]:
    """The Lua text of script ``name`` in two parts, with the constants' ``preamble``: its
    definitions (the constants and the helpers it uses, directly or through other helpers, in
    the order of :func:`lib_text`) and what each call runs (the ``fence`` part, then the script
    itself). Kept, since every Queue asks for every script (a few ms each to work out)."""
    folder = resources.files("kue_core") / "scripts"
    lib = lib_text()
    own = (folder / f"{name}.lua").read_text("utf-8")
    tail = LIB_TAIL.search(lib)
    assert tail is not None, "the helpers end with the code every call runs"
    head = preamble[: preamble.index("\nlocal ") + 1]  # its comment line
    definitions = _locals(preamble) + _locals(lib[: tail.start()])
    known = dict(definitions)
    wanted: set[str] = set()
    todo = set(_IDENTIFIER.findall(_NOT_CODE.sub(" ", own + lib[tail.start() :])))
    while todo:
        found = todo.pop()
        if found in known and found not in wanted:
            wanted.add(found)
            todo |= set(_IDENTIFIER.findall(_NOT_CODE.sub(" ", known[found])))
    used = "".join(text for local, text in definitions if local in wanted)
    return head + used, lib[tail.start() :] + "\n" + own


@functools.cache
def lib_text() -> str:
    """The scripts' helpers: the parts of ``scripts/lib/`` joined in :data:`LIB_PARTS`'s
    order."""
    folder = resources.files("kue_core") / "scripts" / "lib"
    return "".join((folder / f"{part}.lua").read_text("utf-8") for part in LIB_PARTS)


def script_source(name: str) -> str:
    """The Lua text ``EVAL`` runs for ``name``: its definitions, then its body.

    Only the helpers it uses: Redis runs a script's whole text on every call, and each helper
    defined costs time even when not called (capturing the helpers it uses as upvalues is
    linear in the helpers defined before it), up to 20 µs a call. A Redis function
    (:func:`function_library`) pays that once, when it is loaded."""
    return lua_scripts().sources[name]


@dataclass(frozen=True)
class Library:
    """A script as a Redis function (Redis 7 and later): the library ``code`` defines the
    script's helpers once, when loaded, and registers one function of the library's ``name``,
    whose body is the script's. ``KEYS`` and ``ARGV``, globals to a script, are locals of the
    library that each call sets first (the helpers read them too; Redis runs one call at a
    time). The name is the script's and a digest of the code, so every version of every
    script has its own, and any number of versions can share one Redis."""

    name: str
    code: str


#: What a script's function may do beyond the default (may write, refused whole while Redis
#: is over ``maxmemory``): ``no-writes`` for those that only read (so they still answer when
#: Redis is full), ``allow-oom`` for those that free memory (so a full Redis can be emptied).
FUNCTION_FLAGS: dict[str, tuple[str, ...]] = {
    "inspect": ("no-writes",),
    "screen": ("no-writes",),
    "finished": ("no-writes",),
    "remove": ("allow-oom",),
    "retain": ("allow-oom",),
}

#: The prefix of every library (and function) name of ours, for kue doctor to find them.
LIBRARY_PREFIX = "kue_"


def function_library(name: str) -> Library:
    """Script ``name`` as a :class:`Library`."""
    return _library_for(name, lua_preamble())


@functools.lru_cache(maxsize=4 * len(SCRIPT_NAMES))
def _library_for(name: str, preamble: str) -> Library:
    definitions, body = _parts_for(name, preamble)
    flags = ", ".join("'" + flag + "'" for flag in FUNCTION_FLAGS.get(name, ()))
    register = (
        "redis.register_function{function_name=FUNCTION, flags={" + flags + "}, "
        "callback=function(keys, args)\nKEYS, ARGV = keys, args\n" + body + "\nend}\n"
    )
    digest = hashlib.sha1((definitions + register).encode("utf-8")).hexdigest()[:16]
    function = f"{LIBRARY_PREFIX}{name}_{digest}"
    code = (
        "local KEYS, ARGV\n" + definitions + register.replace("FUNCTION", "'" + function + "'", 1)
    )
    return Library(function, f"#!lua name={function}\n" + code)


@dataclass(frozen=True)
class LuaScripts:
    """Every script as a transport sends it, by name: its Lua text (``SCRIPT LOAD``), the
    text's digest (``EVALSHA``) and its library (``FUNCTION LOAD``, ``FCALL``)."""

    sources: dict[str, str]
    shas: dict[str, str]
    libraries: dict[str, Library]

    def command(self, name: str, functions: bool) -> tuple[str, str]:
        """How script ``name`` is called: ``FCALL`` and its function, or (``functions``
        false) ``EVALSHA`` and its digest."""
        if functions:
            return "FCALL", self.libraries[name].name
        return "EVALSHA", self.shas[name]


def lua_scripts() -> LuaScripts:
    """Every script (:data:`SCRIPT_NAMES`) as the constants are now: worked out once, and
    shared by every transport."""
    return _scripts_for(lua_preamble())


@functools.lru_cache(maxsize=4)
def _scripts_for(preamble: str) -> LuaScripts:
    sources = {name: "".join(_parts_for(name, preamble)) for name in SCRIPT_NAMES}
    return LuaScripts(
        sources,
        {name: hashlib.sha1(text.encode()).hexdigest() for name, text in sources.items()},
        {name: _library_for(name, preamble) for name in SCRIPT_NAMES},
    )

"""Named fields at the Lua boundary: a hash's fields are read by position (``h[15]``) only in
the function that read them (its ``HMGET``); a helper that is handed a job's fields, or gets
them back from a loader, reads them by name (``job.fan_out``), as lib/attempts.lua's
``load_job`` gives them, or, on the hot path, by the index constants of a list of
``LUA_FIELDS`` (``h[COMPLETE_FAN_OUT]``, see kue_core/store/lua_source.py). An index means one
thing in one place: adding a field to an ``HMGET`` list shifts the positions after it there,
and nowhere else."""

from __future__ import annotations

import re
from importlib import resources

from kue_core.store.lua_source import LUA_FIELDS, field_indexes
from tests.scripts.lua_text import Function, code_of, functions, innermost, line_of

FOLDER = resources.files("kue_core") / "scripts"

#: Positional reads of values that are not a hash's fields, by (file, function, name): what
#: the value is. Anything else read by position must come from a Redis reply or a table built
#: in the same function.
NOT_HASHES = {
    ("lib/limits.lua", "rate_wait", "limit"): "a rate rule, {max, per ms}, as the rules' JSON",
    ("finished.lua", "<anon>", "a"): "table.sort's pair {score, member}, built in the script",
    ("finished.lua", "<anon>", "b"): "table.sort's pair {score, member}, built in the script",
    ("lib/claims.lua", "claim_first", "got"): "claim's reply, {fields, id}, as the caller's",
    ("lib/claims.lua", "claim_up_to", "why"): "claim's reply, {fields, id} or why none",
    ("complete_batch.lua", "<body>", "got"): "claim_first's reply, {fields, id}, or why not",
    ("complete_batch.lua", "<body>", "jobs"): "claim_up_to's list of jobs claimed (a list)",
    ("tick.lua", "<body>", "made"): "save_unique's reply {id, created}, as save_unique.lua's",
}

#: An HMGET's reply that leaves the function that made it, by (file, function, name): why.
HANDED_ON = {
    ("inspect.lua", "<body>", "fields"): "the reply itself; kue doctor reads it by name",
}

#: The loader of each list of LUA_FIELDS, (file, function): it returns its HMGET's reply,
#: which the helpers read by the list's index constants.
FIELD_LOADERS = {"COMPLETE": ("lib/finishing.lua", "load_for_complete")}

_READ = re.compile(r"\b([A-Za-z_]\w*)\s*\[\s*\d+\s*\]")
_HMGET = re.compile(r"redis\.call\(\s*'HMGET'")


def _files() -> list[tuple[str, str]]:
    found = [(p.name, p.read_text("utf-8")) for p in FOLDER.iterdir() if p.name.endswith(".lua")]
    lib = FOLDER / "lib"
    found += [
        ("lib/" + p.name, p.read_text("utf-8")) for p in lib.iterdir() if p.name.endswith(".lua")
    ]
    return sorted(found)


def _definition(code: str, funcs: list[Function], f: Function, name: str, at: int) -> str:
    """Where ``name``, read at offset ``at`` inside ``f``, comes from: 'param', 'upvalue'
    (defined in a function around ``f``), or the text a ``local`` (or a plain assignment)
    of ``f`` gives it ('' for a loop's variable or a name not found: a global)."""
    if name in f.params:
        return "param"
    before = code[f.start : at]
    assigned = list(
        re.finditer(
            rf"(?:\blocal\s+|^\s*)(?:[A-Za-z_]\w*\s*,\s*)*\b{name}\b(?:\s*,\s*[A-Za-z_]\w*)*"
            r"\s*=(?!=)\s*([^\n]*)",
            before,
            re.M,
        )
    )
    own = [m for m in assigned if innermost(funcs, f.start + m.start(1)) == f]
    if own:
        return own[-1].group(1)
    if re.search(rf"\bfor\b[^\n]*\b{name}\b[^\n]*\b(?:in|do)\b", before):
        return ""
    for outer in funcs:
        around = outer.depth < f.depth and outer.start < f.start and f.end <= outer.end
        if around and outer.name != "<body>":
            defined = rf"\blocal\s+(?:function\s+)?(?:[A-Za-z_]\w*\s*,\s*)*\b{name}\b"
            if name in outer.params or re.search(defined, code[outer.start : f.start]):
                return "upvalue"
    return ""


def _positional_reads() -> list[str]:
    """Each positional read of a value handed in, or given back by a helper, not allowed by
    :data:`NOT_HASHES`."""
    wrong = []
    for path, text in _files():
        code = code_of(text)
        funcs = functions(code)
        for m in _READ.finditer(code):
            name = m.group(1)
            if name in ("KEYS", "ARGV"):
                continue
            f = innermost(funcs, m.start())
            source = _definition(code, funcs, f, name, m.start())
            if (path, f.name, name) in NOT_HASHES:
                continue
            helper = re.match(r"([A-Za-z_][\w.]*)\s*\(", source)
            if source in ("param", "upvalue") or (
                helper and helper.group(1) not in ("redis.call", "redis.pcall", "try")
            ):
                where = f"{path}:{line_of(code, m.start())} {f.name}"
                wrong.append(f"{where}: {m.group()} ({source})")
    return wrong


def test_no_helper_reads_fields_it_was_handed_by_position() -> None:
    wrong = _positional_reads()
    assert not wrong, "\n".join(wrong)


def test_every_hmget_reply_stays_in_the_function_that_made_it() -> None:
    """An ``HMGET``'s reply is unpacked into named locals, or is a ``local`` whose fields are
    read by position there only: it is not returned, passed on, or read by a function inside
    (a loader hands on a table of named fields instead)."""
    wrong = []
    for path, text in _files():
        code = code_of(text)
        funcs = functions(code)
        for m in _HMGET.finditer(text):
            if code[m.start()] == " ":
                continue  # in a comment
            f = innermost(funcs, m.start())
            where = f"{path}:{line_of(code, m.start())} {f.name}"
            if (path, f.name) in FIELD_LOADERS.values():
                continue  # read by the index constants of its list, h[COMPLETE_TYPE]
            if re.search(r"\blocal\s+[\w\s,]+=\s*unpack\(\s*$", code[: m.start()]):
                continue  # named at once: local state, lease, ... = unpack(HMGET ...)
            held = re.search(r"(?:\blocal\s+)?([A-Za-z_]\w*)\s*=\s*$", code[: m.start()])
            if not held:
                wrong.append(f"{where}: an HMGET reply not held in a local")
                continue
            name = held.group(1)
            if (path, f.name, name) in HANDED_ON:
                continue
            end = f.end if f.name != "<body>" else len(code)
            for use in re.finditer(rf"\b{name}\b", code[m.end() : end]):
                at = m.end() + use.start()
                rest = code[at + len(name) :]
                inner = innermost(funcs, at)
                if inner != f and inner.name != "<body>":
                    wrong.append(f"{where}: {name} read in {inner.name}")
                elif (
                    not re.match(r"\s*\[", rest)
                    and not re.match(r"\s*=(?!=)", rest)
                    and not re.search(r"(?:table\.remove|unpack)\(\s*$|#\s*$", code[:at])
                ):
                    wrong.append(f"{where}: {name} handed on at line {line_of(code, at)}")
    assert not wrong, "\n".join(wrong)


def test_each_field_list_is_its_loaders_hmget() -> None:
    """The fields a loader of :data:`FIELD_LOADERS` reads are its list of ``LUA_FIELDS``, in
    order: the index constants name the positions of its reply."""
    assert set(FIELD_LOADERS) == set(LUA_FIELDS)
    files = dict(_files())
    for name, (path, loader) in FIELD_LOADERS.items():
        code = code_of(files[path])
        (f,) = [f for f in functions(code) if f.name == loader]
        text = files[path][f.start : f.end]
        (call,) = re.findall(r"redis\.call\('HMGET', key,([^)]*)\)", text)
        assert tuple(re.findall(r"'(\w+)'", call)) == LUA_FIELDS[name]
        constants = set(re.findall(rf"\b{name}_[A-Z_]+", "".join(t for _, t in _files())))
        assert constants == {f"{name}_{index}" for index in field_indexes(name)}

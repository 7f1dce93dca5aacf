"""The script calls as values (kue_core/store/calls/): every ``.lua`` file of ``scripts/`` has
exactly one builder and every builder names a ``.lua`` file, found by building each public
function of the builder modules and reading the name of the call it makes; and the replies
read into their named fields, with no Redis."""

from __future__ import annotations

import importlib
import pkgutil
import types
import typing
from collections import Counter
from collections.abc import Callable, Sequence
from importlib import resources
from inspect import Parameter, signature
from typing import Any, get_args, get_origin, get_type_hints

import pytest

from kue_core.base.keys import Keys
from kue_core.store import calls
from kue_core.store.lua_source import SCRIPT_NAMES

#: The builder modules: every module of the package but the values and the replies.
MODULES = [
    importlib.import_module(f"{calls.__name__}.{m.name}")
    for m in pkgutil.iter_modules(calls.__path__)
    if m.name not in ("call", "replies")
]
KEYS = Keys("t")
#: Public functions of the builder modules that are no builder.
HELPERS = {"next_args", "server_now"}


def _public(module: types.ModuleType) -> dict[str, Callable[..., Any]]:
    return {
        name: fn
        for name, fn in vars(module).items()
        if callable(fn)
        and not name.startswith("_")
        and getattr(fn, "__module__", "") == module.__name__
    }


def _example(hint: Any) -> Any:
    """A value of type ``hint`` for building a call (nothing is sent)."""
    if hint is Keys:
        return KEYS
    if hint in (int, str, bool):
        return {int: 1, str: "x", bool: False}[hint]
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = get_args(hint)
        return None if type(None) in options else _example(options[0])
    if origin in (Sequence, list, tuple):
        return ()
    if origin is dict:
        return {}
    raise AssertionError(f"no example of {hint!r}: add one")


def _built(fn: Callable[..., Any]) -> calls.Call[Any] | None:
    """The call ``fn`` makes, or None when ``fn`` makes no call (by its annotation)."""
    hints = get_type_hints(fn)
    if get_origin(hints["return"]) is not calls.Call:
        return None
    params = signature(fn).parameters.values()
    args = {p.name: _example(hints[p.name]) for p in params if p.default is Parameter.empty}
    made = fn(**args)
    assert isinstance(made, calls.Call), fn
    return made


def _builders() -> dict[str, str]:
    """Builder (module.function) -> the script its call runs."""
    found = {}
    for module in MODULES:
        for name, fn in _public(module).items():
            made = _built(fn)
            if made is not None:
                found[f"{module.__name__}.{name}"] = made.name
    return found


def test_every_lua_file_has_exactly_one_builder_and_back() -> None:
    folder = resources.files("kue_core") / "scripts"
    files = {p.name[:-4] for p in folder.iterdir() if p.name.endswith(".lua")}
    assert files == set(SCRIPT_NAMES)
    builders = _builders()
    made = Counter(builders.values())
    assert not {s for s, n in made.items() if n > 1}, "a script with two builders"
    assert set(made) == files, (set(made) - files, files - set(made))
    # Each named after its script, re-exported by the package.
    for builder, script in builders.items():
        assert builder.rsplit(".", 1)[1] == script
        assert getattr(calls, script).__module__ == builder.rsplit(".", 1)[0]


def test_the_builder_modules_hold_builders_and_their_helpers_only() -> None:
    names = {name for module in MODULES for name in _public(module)}
    builders = {b.rsplit(".", 1)[1] for b in _builders()}
    assert names - builders == HELPERS


# -- replies, read into named fields ----------------------------------------------------------
def test_a_completion_reply_reads_its_outcome_next_job_and_tally() -> None:
    tallied = calls.complete(KEYS, 4, "tok", "{}", ("w", 1000), tallied=True)
    ended = tallied.parse(["lease", "t5", 5, 100, 20, "completed"])  # the id after the fields
    assert ended == calls.Reported("completed", (5, {"lease": "t5"}), calls.Completion(100, 20))
    assert ended.tally is not None and ended.tally.duration_ms == 20
    assert tallied.parse(["", "", "completed"]) == ("completed", None, None)
    plain = calls.complete(KEYS, 4, "tok", "{}", None)
    assert plain.args[-2:] == ("", "") and plain.args[3] == ""
    assert plain.parse(["paused", "completed"]) == ("completed", calls.PAUSED, None)
    assert calls.fail(KEYS, 4, "tok", "m", "t", -1, None).parse(["failed"]).outcome == "failed"


def test_a_batch_of_completions_sends_each_then_the_claim_and_reads_its_reports() -> None:
    batch = calls.complete_batch(
        KEYS, [(4, "t4", "{}"), (7, "t7", "1")], ("w", 1000, 3, ["a", "b"])
    )
    assert batch.name == "complete_batch" and batch.key == KEYS.leases
    assert batch.args == (2, 4, "t4", "{}", 7, "t7", "1", "w", 1000, 3, "a", "b")
    reply = ["lease", "3", 9, "limited", "50", 100, 20, "complete", "", "", "refused", 2, 3, 1]
    done = batch.parse(reply)
    assert done.reports == [
        calls.Reported("complete", None, calls.Completion(100, 20)),
        calls.Reported("refused", None, None),
    ]
    assert done.jobs == [(9, {"lease": "3"})] and done.why == calls.Held(50)
    alone = calls.complete_batch(KEYS, [(4, "t4", "{}")], None)
    assert alone.args == (1, 4, "t4", "{}", "", "", 0)
    assert alone.parse(["", "", "complete", 0, 0]) == ([("complete", None, None)], [], None)
    paused = calls.complete_batch(KEYS, [], ("w", 1000, 2, ["a"])).parse(["paused", 1, 0])
    assert paused.reports == [] and paused.why == calls.PAUSED


def test_heartbeat_promote_and_recover_replies_have_names() -> None:
    beat = calls.heartbeat(KEYS, "w", 1000, "{}", [(1, "a"), (2, "b")])
    assert beat.args == ("w", "", "beat", 1000, "{}", 2, 1, "a", 2, "b")
    lost = beat.parse(["ok", "2", "b"])
    assert lost == [(2, "b")] and isinstance(lost, list) and lost[0].token == "b"
    holder = beat.parse(["taken", '{"host": "h"}', "5", "100", "9", "i2"])
    assert isinstance(holder, calls.Holder) and holder.info == {"host": "h"}
    promoted = calls.promote(KEYS, 10).parse([3, -1, 1000, 2000])
    assert (promoted.moved, promoted.next_due, promoted.now, promoted.schedule_due) == (
        3,
        -1,
        1000,
        2000,
    )
    assert calls.recover(KEYS, 1, 10).parse(["1", "2"]).failed == 2
    assert calls.retain(KEYS, 10).parse([0, 4]).removed == 4


def test_inspect_reads_each_job_by_field_name() -> None:
    call = calls.inspect(KEYS, [("7", ["jobs:x"]), ("8", [])], ["email"])
    assert call.args == (2, 1, "7", 1, "jobs:x", "8", 0, "email")
    fields = ["email", "active", "0", None, "0", "900", "800", "0", "w1", "2", "3", 1, 0, 1, "2500"]
    snapshot = call.parse(
        [
            1000,
            [["7", "hash", fields, ["jobs", "0", "leases", "1500"]], ["8", "none", [], []]],
            [[3, 2]],
        ]
    )
    seven, eight = snapshot.jobs
    assert snapshot.now == 1000 and snapshot.types == [calls.TypeSnapshot(3, 2)]
    assert seven.id == 7 and seven.kind == "hash" and seven.sets == {"jobs": 0.0, "leases": 1500.0}
    f = seven.fields
    assert f is not None
    assert (f.type, f.state, f.updated_at, f.created_at, f.worker_id, f.stalls) == (
        "email",
        "active",
        "900",
        "800",
        "w1",
        "2",
    )
    assert (f.has_data, f.known_type, f.fans_out) == (True, False, True)
    assert (f.lease, f.worker_lease) == ("3", 2500.0)
    assert eight.kind == "none" and eight.fields is None and eight.sets == {}


def test_screen_and_repair_replies() -> None:
    screened = calls.screen(KEYS, "jobs", ["01|1"], [(3, "log")])
    assert screened.args == ("jobs", 1, "01|1", 3, "log")
    assert screened.parse([["01|1"], ["3", "log"]]) == calls.Screened(["01|1"], [(3, "log")])
    assert calls.repair(KEYS, [("unindex", "jobs", "01|1", "")]).parse([1]) == [1]


@pytest.mark.parametrize("types_", ["email", ["email", "sms"]])
def test_a_claim_is_keyed_by_its_first_type(types_: str | list[str]) -> None:
    claim = calls.claim(KEYS, types_, "w", 500)
    assert claim.key == KEYS.type_state("email", "inactive")
    assert claim.parse(["limited", "40"]) == calls.Held(40)
    assert claim.parse([]) is None


@pytest.mark.parametrize("types_", ["email", ["email", "sms"]])
def test_a_batch_claim_is_keyed_by_its_first_type(types_: str | list[str]) -> None:
    batch = calls.claim_batch(KEYS, types_, "w", 500, 4)
    assert batch.key == KEYS.type_state("email", "inactive")
    assert batch.args[:3] == ("w", 500, 4)
    assert batch.parse([None]) == calls.Batch([], None)
    job = ["state", "active", "lease", "2", "7"]
    assert batch.parse([job, ["limited", "40"]]) == calls.Batch(
        [(7, {"state": "active", "lease": "2"})], calls.Held(40)
    )
    assert batch.parse([job, job, ["wait", "", "paused"]]).why == calls.Waits((None, "paused"))
    assert batch.parse([job, None]).why is None

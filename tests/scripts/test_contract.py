"""The Lua files and their Python wrappers match, and every script states its contract."""

from __future__ import annotations

from importlib import resources

import pytest

from kue_core.scripts import SCRIPT_NAMES, Scripts, script_source

FOLDER = resources.files("kue_core") / "scripts"


def test_every_lua_file_has_a_wrapper_and_back() -> None:
    files = {p.name[:-4] for p in FOLDER.iterdir() if p.name.endswith(".lua")}
    assert files - {"lib"} == set(SCRIPT_NAMES)
    for name in SCRIPT_NAMES:
        assert callable(getattr(Scripts, name)), name


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_header_contract(name: str) -> None:
    text = (FOLDER / f"{name}.lua").read_text("utf-8")
    header = text.split("\nlocal ", 1)[0]
    assert header.startswith(f"-- {name}:")
    for part in ("KEYS[1]", "ARGV[1]", "Returns", "Events"):
        assert part in header, f"{name}.lua header lacks {part}"


def test_scripts_are_loaded_once_per_client(queue, r) -> None:  # type: ignore[no-untyped-def]
    queue.create_job("t").save()
    before = r.info("commandstats").get("cmdstat_script", {}).get("calls", 0)
    for _ in range(5):
        queue.create_job("t").save()
    after = r.info("commandstats").get("cmdstat_script", {}).get("calls", 0)
    assert after == before
    assert "local function now_ms" in script_source("save")

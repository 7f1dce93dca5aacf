"""Every page's examples run as a reader would run them (tests/docs/runner.py): its blocks in
order, in one empty folder, on this test worker's Redis, with the default key prefix ``q`` the
examples use; what a block prints is compared with the page's output block.

The keys the examples write are deleted before and after each page; pages run one at a time on
a Redis (a lock on it), since tests that share one (``KUE_TEST_REDIS_URL``) would otherwise
share their keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import drop_keys
from tests.docs.markdown import parse
from tests.docs.pages import DOCS, blocks_of, params
from tests.docs.runner import ExampleFailed, environment, page_runner

#: The key prefixes the examples write under: Queue()'s default, and the Redis lists of
#: docs/rules.md's events.
PREFIXES = ("q:",)


@pytest.fixture
def examples_redis(redis_url: str) -> Iterator[str]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with client.lock("kue-docs-examples:lock", timeout=900, blocking_timeout=900):
        for prefix in PREFIXES:
            drop_keys(client, prefix)
        try:
            yield redis_url
        finally:
            for prefix in PREFIXES:
                drop_keys(client, prefix)
    client.close()


@pytest.mark.single_node
@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", params())
def test_the_page_examples_run(page: Path, examples_redis: str, tmp_path: Path) -> None:
    blocks = blocks_of(page)
    folder, scripts = tmp_path / "folder", tmp_path / "blocks"
    folder.mkdir()
    scripts.mkdir()
    with page_runner(folder, scripts, environment(examples_redis, folder)) as runner:
        runner.run(blocks)


def run_page(text: str, tmp_path: Path, redis_url: str) -> int:
    tmp_path.mkdir(exist_ok=True)
    folder, scripts = tmp_path / "folder", tmp_path / "blocks"
    folder.mkdir()
    scripts.mkdir()
    with page_runner(folder, scripts, environment(redis_url, folder)) as runner:
        return runner.run(parse(text, "p.md"))


def test_a_page_runs_its_blocks_in_one_folder(tmp_path: Path, redis_url: str) -> None:
    page = (
        "<!-- file: greet.py -->\n```python\nNAME = 'ada'\n```\n"
        "```python\nimport os\nfrom greet import NAME\n"
        "print(NAME, os.environ['KUE_REDIS_URL'] != '')\nopen('made', 'w').close()\n```\n"
        "<!-- output -->\n```text\nada True\n```\n"
        "<!-- run -->\n```bash\ntest -e made && python -c 'print(\"job 7 took 12 ms\")'\n```\n"
        "<!-- output -->\n```text\njob ... took ... ms\n```\n"
    )
    assert run_page(page, tmp_path, redis_url) == 2


@pytest.mark.parametrize(
    ("page", "error"),
    [
        ("\n```python\nimport sys\nsys.exit('no')\n```\n", "p.md:2: exited with status 1"),
        ("```python\n\n1 / 0\n```\n", "line 3, in <module>\n    1 / 0"),  # the page's line
        ("```python\nprint(1)\n```\n<!-- output -->\n```text\n2\n```\n", "p.md:1: printed"),
        (
            "<!-- run-until: never -->\n```bash\necho started\n```\n",
            "p.md:2: exited (0) before printing 'never'",
        ),
        (
            "<!-- run-until: up -->\n```python\nimport time\nprint('up')\ntime.sleep(60)\n```\n",
            "exited with status -2 after Ctrl-C",  # killed by KeyboardInterrupt
        ),
    ],
    ids=["status", "traceback", "output", "exited", "ctrl-c"],
)
def test_a_failing_block_is_named_with_its_output(
    page: str, error: str, tmp_path: Path, redis_url: str
) -> None:
    with pytest.raises(ExampleFailed) as e:
        run_page(page, tmp_path, redis_url)
    assert error in str(e.value)


def test_the_example_of_how_to_write_one_runs(tmp_path: Path, examples_redis: str) -> None:
    """docs/contributing.md's example page (a file, a worker in the background, a script and
    its output) is itself a page that runs."""
    (example,) = [b for b in blocks_of(DOCS / "contributing.md") if b.lang == "markdown"]
    assert run_page(example.code, tmp_path, examples_redis) == 2


def test_a_transcript_runs_its_commands_and_compares_each_output(
    tmp_path: Path, redis_url: str
) -> None:
    page = (
        "<!-- run -->\n```console\n$ echo one; echo took 12 ms\none\ntook ... ms\n"
        "$ touch made\n$ ls\nmade\n$ echo shown; exit 1\nshown\n```\n"
    )
    assert run_page(page, tmp_path / "a", redis_url) == 1
    wrong = "<!-- run -->\n```console\n$ echo one\none\n$ echo two\nthree\n```\n"
    with pytest.raises(ExampleFailed, match=r"p\.md:5: printed something else .*\nthree"):
        run_page(wrong, tmp_path / "b", redis_url)
    silent = "<!-- run -->\n```console\n$ echo one\none\n$ false\n```\n"
    with pytest.raises(ExampleFailed, match=r"p\.md:5: exited with status 1"):
        run_page(silent, tmp_path / "c", redis_url)
    # What a command prints may take a moment to be what the page shows (figures a worker
    # adds every second): it runs again until it is, for SETTLE_S at most.
    later = "$ test -e seen && echo ready || { touch seen; echo not yet; }\nready\n"
    assert run_page(f"<!-- run -->\n```console\n{later}```\n", tmp_path / "d", redis_url) == 1


def test_a_block_with_a_dashboard_reaches_it_on_the_page_port(
    tmp_path: Path, examples_redis: str
) -> None:
    """Port 3000 on the page is a free port of the page's, where the runner's kue dashboard
    serves (tests in parallel cannot share one port)."""
    page = (
        "<!-- run-with-dashboard -->\n```console\n"
        "$ curl -s http://127.0.0.1:3000/api/health; curl -s localhost:3000/api/health\n"
        '{"status":"ok",...}\n{"status":"ok",...}\n'
        '$ echo "$KUE_DASHBOARD_PORT" | grep -vx 3000\n...\n```\n'
        "<!-- run-with-dashboard -->\n```bash\ncurl -sf http://127.0.0.1:3000/api/stats\n```\n"
    )
    assert run_page(page, tmp_path, examples_redis) == 2


def test_only_the_pages_port_3000_is_the_pages_own(tmp_path: Path, redis_url: str) -> None:
    page = (
        "<!-- run -->\n```console\n"
        "$ echo 127.0.0.1:3000 localhost:3000/api 127.0.0.1:30000 10.0.0.1:3000 "
        '| sed "s/$KUE_DASHBOARD_PORT/PORT/g"\n'
        "127.0.0.1:PORT localhost:PORT/api 127.0.0.1:30000 10.0.0.1:3000\n```\n"
    )
    assert run_page(page, tmp_path, redis_url) == 1

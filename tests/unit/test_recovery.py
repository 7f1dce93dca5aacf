"""What a transport does when a call does not simply run (``kue_core.store.recovery``), decided
apart from any I/O: for each error reply a server gives, and for a batch whose calls ran, or
not, in any mix; and the loops that carry it out, driven here by hand as a transport drives
them (each action answered with what came of it). The transports carrying the decisions out
against a real server are tested in tests/integration (test_functions.py, test_cluster.py,
test_connection.py)."""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import NoScriptError, ResponseError

from kue_core import (
    ConnectionFailed,
    HasDependents,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    KueError,
)
from kue_core.base.errors import Unreachable
from kue_core.store import recovery
from kue_core.store.calls import Call
from kue_core.store.cluster import Redirected
from kue_core.store.recovery import (
    FALL_BACK,
    LOAD_FUNCTION,
    LOAD_SCRIPT,
    LOADED,
    RAISE,
    REDIRECT,
    TRIES,
    Load,
    Loop,
    Pause,
    Redirects,
    Resend,
    Unsent,
    batch_remedy,
    load_failed,
    lost,
    merged,
    recover_batch,
    recover_call,
    redo,
    remedy,
    replies,
    settled,
    translate,
    unreachable,
    unrecoverable,
)

#: What servers answer an FCALL they cannot run (Redis 6.2 has no functions; an ACL may
#: forbid them), as each words it.
NO_FUNCTIONS = [
    "unknown command `FCALL`, with args beginning with: `kue_1_save`, `1`, ",
    "unknown command `FUNCTION`, with args beginning with: `LOAD`, ",
    "NOPERM User app has no permissions to run the 'fcall' command",
    "NOPERM this user has no permissions to run the 'function|load' command",
]


@pytest.mark.parametrize("text", NO_FUNCTIONS)
def test_a_server_without_functions_makes_the_scripts_fall_back(text: str) -> None:
    # Whether or not the scripts still run as functions: another call may have found out first.
    assert remedy(ResponseError(text), functions=True) == FALL_BACK
    assert remedy(ResponseError(text), functions=False) == FALL_BACK


def test_a_lost_function_is_loaded_only_while_the_scripts_are_functions() -> None:
    missing = ResponseError("Function not found")
    assert remedy(missing, functions=True) == LOAD_FUNCTION
    # Sent as EVALSHA, an FCALL's reply cannot come back: raised, not loaded for ever.
    assert remedy(missing, functions=False) == RAISE


def test_a_lost_script_is_loaded() -> None:
    error = NoScriptError("No matching script. Please use EVAL.")
    assert remedy(error, functions=False) == LOAD_SCRIPT


@pytest.mark.parametrize("elsewhere", [True, False])
def test_a_redirect_is_sent_again(elsewhere: bool) -> None:
    assert remedy(Redirected("slot 1 moved", elsewhere=elsewhere), functions=True) == REDIRECT


@pytest.mark.parametrize(
    "text",
    [
        "KUE_NOT_FOUND 7",
        # Raised inside a function by a command it ran: never taken for a server without them.
        "ERR user_function:12: Unknown Redis command called from script script: on "
        "@user_function:12.",
        "ERR Error running script, unknown command `FCALL` called from script",
        "WRONGTYPE Operation against a key holding the wrong kind of value",
    ],
)
def test_an_error_of_the_call_itself_is_raised(text: str) -> None:
    assert remedy(ResponseError(text), functions=True) == RAISE


def test_a_dropped_connection_is_raised_not_resent() -> None:
    # Lost after the call was sent: it may have run, so it is never sent again.
    assert remedy(redis.ConnectionError("Connection reset by peer"), functions=True) == RAISE


@pytest.mark.parametrize(
    ("text", "after"),
    [
        ("Library 'kue_1' already exists", LOADED),  # another process loaded it meanwhile
        (NO_FUNCTIONS[3], FALL_BACK),  # may call functions, but not load them
        ("ERR Error compiling function: user_function:1: syntax error", RAISE),
    ],
)
def test_what_a_failed_load_means(text: str, after: str) -> None:
    assert load_failed(ResponseError(text)) == after


def test_kue_error_replies_become_their_exceptions() -> None:
    found = translate(ResponseError("KUE_NOT_FOUND 7"))
    assert isinstance(found, JobNotFound) and found.job_id == 7
    held = translate(ResponseError("KUE_HAS_DEPENDENTS 3 4,5"))
    assert isinstance(held, HasDependents) and held.dependents == [4, 5]
    moved = translate(ResponseError("KUE_INVALID_TRANSITION job 3 is complete"))
    assert isinstance(moved, InvalidTransition) and str(moved) == "job 3 is complete"
    other = ResponseError("OOM command not allowed")
    assert translate(other) is other


def test_giving_up_is_a_connection_failure_of_both_kinds() -> None:
    # A ConnectionFailed (as the asyncio client raised) and a redis.ConnectionError (as the
    # blocking one did, and the worker's loops catch): either client raises the same.
    for error in (
        unreachable("save", redis.ConnectionError("Connection refused")),
        unrecoverable("save"),
    ):
        assert isinstance(error, ConnectionFailed) and isinstance(error, KueError)
        assert isinstance(error, redis.ConnectionError)
    assert "could not send the save script: Connection refused" in str(
        unreachable("save", redis.ConnectionError("Connection refused"))
    )


def test_plain_commands_without_a_connection_fail_as_calls_do() -> None:
    refused = lost(redis.ConnectionError("Error 111 connecting to 127.0.0.1:1."))
    assert isinstance(refused, Unreachable) and "Error 111" in str(refused)
    redirect = Redirected("slot 1 moved")
    assert lost(redirect) is redirect  # a redirect that outlasted redis-py's retries
    failed = Unreachable("could not send")
    assert lost(failed) is failed


def test_redirects_are_resent_at_once_then_paced_then_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moved = Redirected("slot 1 is migrating", elsewhere=False)
    pacing = Redirects()
    assert pacing.pause(moved) == 0.0  # a moved slot is served at once by its new owner
    assert 0 < pacing.pause(moved) <= 0.25
    monkeypatch.setattr(recovery, "REDIRECT_PATIENCE", 0.0)
    with pytest.raises(Redirected, match="migrating"):
        Redirects().pause(moved)


def _saves(n: int) -> list[Call[int]]:
    return [Call("save", "q:ids", (i,), int) for i in range(n)]


def test_a_batch_whose_calls_all_ran_needs_nothing() -> None:
    # A call that ran and failed (KUE_*) is not sent again: replies() raises it.
    results = [1, ResponseError("KUE_INVALID bad"), 3]
    assert batch_remedy(results, loads=0, functions=True) is None


def test_a_batch_sends_again_only_the_calls_that_did_not_run() -> None:
    batch = _saves(4)
    missing = ResponseError("Function not found")
    results = [ResponseError("KUE_INVALID bad"), missing, 2, missing]
    assert batch_remedy(results, loads=0, functions=True) == (LOAD_FUNCTION, missing)
    again = redo(batch, results)
    assert [c.args for c in again] == [(1,), (3,)]
    done = merged(results, ["11", "13"])
    assert done[1:] == ["11", 2, "13"] and done[0] is results[0]
    with pytest.raises(InvalidJob):
        replies(batch, done)


def test_a_batch_gives_up_after_two_loads_but_not_on_redirects() -> None:
    missing = NoScriptError("No matching script.")
    assert batch_remedy([1, missing], loads=1, functions=False) == (LOAD_SCRIPT, missing)
    assert batch_remedy([1, missing], loads=2, functions=False) == (RAISE, missing)
    moved = Redirected("slot 1 moved")
    assert batch_remedy([moved, missing], loads=2, functions=False) == (REDIRECT, moved)


def test_a_batch_that_ran_reads_each_reply() -> None:
    assert replies(_saves(3), ["7", "8", "9"]) == [7, 8, 9]
    with pytest.raises(JobNotFound):
        replies(_saves(2), ["7", ResponseError("KUE_NOT_FOUND 3")])
    lost_one = redis.ConnectionError("lost")
    with pytest.raises(redis.ConnectionError, match="lost"):
        replies(_saves(2), ["7", lost_one])


# -- the loops, driven by hand --------------------------------------------------------------
class _Mode:
    """The transport as a loop reads it: whether the scripts run as functions now."""

    def __init__(self, functions: bool = True) -> None:
        self.functions = functions


def _returned(loop: Loop[object], answer: object) -> object:
    """What ``loop`` returns once sent ``answer`` (it must ask for nothing more)."""
    with pytest.raises(StopIteration) as done:
        loop.send(answer)
    return done.value.value


def test_a_redirected_call_is_sent_again_at_once_then_paced() -> None:
    moved = Redirected("slot 1 moved", elsewhere=True)
    loop = recover_call("save", moved, _Mode())
    assert next(loop) == Pause(0.0)  # a moved slot is served at once by its new owner
    assert loop.send(None) == Resend()
    pause = loop.send(Redirected("slot 1 is migrating", elsewhere=False))
    assert isinstance(pause, Pause) and 0 < pause.seconds <= 0.25
    assert loop.send(None) == Resend()
    assert _returned(loop, b"7") == b"7"


def test_a_lost_script_is_loaded_then_the_call_sent_again() -> None:
    loop = recover_call("save", NoScriptError("No matching script."), _Mode(functions=False))
    assert next(loop) == Load(LOAD_SCRIPT)
    assert loop.send(None) == Resend()
    assert _returned(loop, b"7") == b"7"


def test_a_lost_function_is_loaded_and_a_refused_load_falls_back() -> None:
    mode = _Mode()
    loop = recover_call("save", ResponseError("Function not found"), mode)
    assert next(loop) == Load(LOAD_FUNCTION)
    # This user may call functions but not load them: the scripts run as scripts.
    assert loop.send(ResponseError(NO_FUNCTIONS[3])) == Load(FALL_BACK)
    mode.functions = False
    assert loop.send(None) == Resend()
    assert _returned(loop, b"7") == b"7"


def test_a_function_another_process_loaded_meanwhile_is_called_at_once() -> None:
    loop = recover_call("save", ResponseError("Function not found"), _Mode())
    assert next(loop) == Load(LOAD_FUNCTION)
    assert loop.send(ResponseError("Library 'kue_1' already exists")) == Resend()
    assert _returned(loop, b"7") == b"7"


def test_a_function_that_does_not_compile_is_raised() -> None:
    loop = recover_call("save", ResponseError("Function not found"), _Mode())
    assert next(loop) == Load(LOAD_FUNCTION)
    with pytest.raises(ResponseError, match="syntax error"):
        loop.send(ResponseError("ERR Error compiling function: syntax error"))


def test_a_call_that_reaches_no_connection_is_given_up_after_tries() -> None:
    loop = recover_call("save", Unsent("Connection refused"), _Mode())
    assert next(loop) == Resend()
    for _ in range(TRIES - 2):
        assert loop.send(Unsent("Connection refused")) == Resend()
    with pytest.raises(Unreachable, match="could not send the save script: Connection refused"):
        loop.send(Unsent("Connection refused"))


def test_a_script_lost_again_and_again_is_given_up_after_two_loads() -> None:
    lost_script = NoScriptError("No matching script.")
    loop = recover_call("save", lost_script, _Mode(functions=False))
    assert next(loop) == Load(LOAD_SCRIPT)
    assert loop.send(None) == Resend()
    assert loop.send(lost_script) == Load(LOAD_SCRIPT)
    assert loop.send(None) == Resend()
    with pytest.raises(Unreachable, match="could not run the save script"):
        loop.send(lost_script)


def test_a_kue_error_reply_is_raised_at_once_and_never_sent_again() -> None:
    loop = recover_call("save", ResponseError("KUE_NOT_FOUND 7"), _Mode())
    with pytest.raises(JobNotFound):
        next(loop)
    # Neither is one that came back after a redirect.
    loop = recover_call("save", Redirected("slot 1 moved"), _Mode())
    assert next(loop) == Pause(0.0)
    assert loop.send(None) == Resend()
    with pytest.raises(InvalidJob):
        loop.send(ResponseError("KUE_INVALID bad"))


def test_a_batch_sends_again_only_its_redirected_call() -> None:
    batch = _saves(3)
    results = ["1", Redirected("slot 1 moved"), "3"]
    assert not settled(results) and settled(["1", ResponseError("KUE_INVALID bad")])
    loop = recover_batch(batch, results, _Mode())
    assert next(loop) == Pause(0.0)
    assert loop.send(None) == Resend([batch[1]])
    assert _returned(loop, ["2"]) == [1, 2, 3]


def test_a_batch_loads_its_function_then_reads_every_reply() -> None:
    batch = _saves(4)
    missing = ResponseError("Function not found")
    loop = recover_batch(batch, [ResponseError("KUE_INVALID bad"), missing, "2", missing], _Mode())
    assert next(loop) == Load(LOAD_FUNCTION)
    assert loop.send(None) == Resend([batch[1], batch[3]])
    with pytest.raises(InvalidJob):  # once every call that could run has
        loop.send(["11", "13"])


def test_a_batch_whose_script_stays_lost_raises_after_two_loads() -> None:
    batch = _saves(2)
    lost_script = NoScriptError("No matching script.")
    loop = recover_batch(batch, ["1", lost_script], _Mode(functions=False))
    assert next(loop) == Load(LOAD_SCRIPT)
    assert loop.send(None) == Resend([batch[1]])
    assert loop.send([lost_script]) == Load(LOAD_SCRIPT)
    assert loop.send(None) == Resend([batch[1]])
    with pytest.raises(NoScriptError):  # TRIES - 1 loads made: raised as the reply it is
        loop.send([lost_script])

"""What a cluster's error replies mean for a script call (``cluster.redirected``), as each
server words them: Redis 6.2 and 7, and Valkey 9, which words the fence's refusal its own way
(a slot migrating under a script that read a key of it)."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from kue_core.store.cluster import SlotMap, redirected


@pytest.mark.parametrize(
    "text",
    [
        "Lua script attempted to access a non local key in a cluster node",  # Redis 6.2
        "Script attempted to access a non local key in a cluster node script: on "
        "@user_function:12.",  # Redis 7
        "Attempted to access a non local key in a cluster node script: on @user_function:629.",
    ],
)
def test_a_fenced_script_waits_out_the_migration_on_each_server(text: str) -> None:
    owner = SlotMap([("127.0.0.1", 7000)], 42, {})
    found = redirected(ResponseError(text), owner)
    assert found is not None and "slot 42 is migrating" in str(found)
    assert not found.elsewhere  # the owner is the same: the call waits, then goes again


def test_another_error_is_no_redirect() -> None:
    owner = SlotMap([("127.0.0.1", 7000)], 42, {})
    assert redirected(ResponseError("ERR unknown command"), owner) is None

"""The keys of ``kue rules`` under a queue's prefix: ``<prefix>:rules:<rest>`` (its watchers,
counters, recent events, locks; see :mod:`kue_rules.store`). kue_core's own keys are in
:class:`kue_core.Keys`, which knows nothing of these."""

from __future__ import annotations

from kue_core import Keys


def rules_key(keys: Keys, rest: str) -> str:
    """The ``kue rules`` key ``rest`` under ``keys``' prefix."""
    return f"{keys.prefix}:rules:{rest}"

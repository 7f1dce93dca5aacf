"""Both clients' side of signals (see :mod:`kue_core.features.signals`): giving a job a
signal. Part of ``Queue`` and of ``AsyncQueue``."""

from __future__ import annotations

from typing import Any

from ..base import checks
from ..base.keys import Keys
from ..base.sealing import Keyring
from ..features import signals
from ..store import calls
from ..store.aio_transport import AsyncTransport
from ..store.transport import Transport


def _call(keys: Keys, ring: Keyring | None, job_id: int | str, name: str, payload: Any) -> Any:
    jid = checks.job_id(job_id)
    name = signals.check_name(name)
    return calls.signal(keys, jid, name, signals.payload_text(name, payload, ring))


class SignalMethods:
    """Mixed into ``Queue``."""

    keys: Keys
    keyring: Keyring | None
    scripts: Transport

    def signal(self, job_id: int | str, name: str, payload: Any = None) -> str:
        """Give job ``job_id`` signal ``name`` with ``payload`` (any JSON value, at most
        ``SIGNAL_PAYLOAD_BYTES``), which its handler reads as ``job.signals[name]``:
        ``"resumed"`` when the job was suspended waiting for it (``WaitForSignal``; it waits
        for a worker now), ``"kept"`` (it is kept until the job waits for it), or
        ``"already"`` (the job had a signal of that name: nothing changed, so a sender may
        send again safely). ``JobNotFound``; ``InvalidTransition`` for a job that has ended."""
        return str(self.scripts.call(_call(self.keys, self.keyring, job_id, name, payload)))


class AsyncSignalMethods:
    """Mixed into ``AsyncQueue``."""

    keys: Keys
    keyring: Keyring | None
    scripts: AsyncTransport

    async def signal(self, job_id: int | str, name: str, payload: Any = None) -> str:
        """``Queue.signal``, awaited."""
        call = _call(self.keys, self.keyring, job_id, name, payload)
        return str(await self.scripts.call(call))

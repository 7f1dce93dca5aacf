"""Encryption at rest, public: a queue's keys and the envelope its payloads are stored in (see
:mod:`kue_core.base.sealing`, and docs/security.md)."""

from .base.sealing import PREFIX, SEALED, Keyring, is_sealed, key_id_of, keyring, opened_value

__all__ = ["PREFIX", "SEALED", "Keyring", "is_sealed", "key_id_of", "keyring", "opened_value"]

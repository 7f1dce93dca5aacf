"""Large payloads outside Redis, public: the stores and the reference a job keeps (see
:mod:`kue_core.base.payloads`, and docs/payloads.md)."""

from .base.payloads import PREFIX, STORED, FileStore, Offload, PayloadStore, from_url, name_of
from .base.s3_payloads import S3Store

__all__ = [
    "PREFIX",
    "STORED",
    "FileStore",
    "Offload",
    "PayloadStore",
    "S3Store",
    "from_url",
    "name_of",
]

"""The payload store in S3 or any S3-compatible store (``s3://bucket/prefix``): values are
objects under the prefix. boto3 is imported here only, when a queue is given such a store
(``pip install kue[s3]``); it finds the endpoint and credentials as it always does
(``AWS_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL_S3``, ``AWS_ACCESS_KEY_ID``, a profile, a role)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .errors import InvalidJob

#: Names one DeleteObjects request takes at most (S3's limit).
_DELETE_BATCH = 1000


class S3Store:
    """Values as objects of ``bucket`` under ``prefix``."""

    slow = True

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        if client is None:
            try:
                import boto3
            except ImportError:
                raise InvalidJob(
                    "an s3:// payload store needs boto3: pip install 'kue[s3]'"
                ) from None
            client = boto3.client("s3")
        self._s3 = client
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.url = f"s3://{bucket}/{prefix}"

    def put(self, name: str, value: bytes) -> None:
        self._s3.put_object(Bucket=self.bucket, Key=self.prefix + name, Body=value)

    def get(self, name: str) -> bytes:
        try:
            found = self._s3.get_object(Bucket=self.bucket, Key=self.prefix + name)
        except self._s3.exceptions.NoSuchKey:
            raise KeyError(name) from None
        body: bytes = found["Body"].read()
        return body

    def delete(self, names: list[str]) -> None:
        """Delete ``names``; ``OSError`` when S3 refused some (DeleteObjects answers each
        key's failure in its reply rather than raising): the sweep then puts them all back
        in the trash, to be deleted again (deleting a deleted key is no error)."""
        failed: list[str] = []
        for start in range(0, len(names), _DELETE_BATCH):
            batch = [{"Key": self.prefix + n} for n in names[start : start + _DELETE_BATCH]]
            answer = self._s3.delete_objects(
                Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
            )
            failed += [f"{e.get('Key')}: {e.get('Code')}" for e in answer.get("Errors") or ()]
        if failed:
            raise OSError(f"S3 did not delete {len(failed)} values: {', '.join(failed[:3])}")

    def names(self, prefix: str) -> Iterator[tuple[str, float]]:
        pages = self._s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix + prefix + "/"
        )
        for page in pages:
            for item in page.get("Contents", ()):
                yield item["Key"][len(self.prefix) :], item["LastModified"].timestamp()

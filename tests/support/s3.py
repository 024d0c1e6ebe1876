"""A local S3-compatible server (moto's server mode) on loopback, with one empty bucket."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test-access-key",  # pragma: allowlist secret
    "AWS_SECRET_ACCESS_KEY": "test-secret-key",  # pragma: allowlist secret
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    bucket: str

    def client(self) -> Any:
        return boto3.client("s3", endpoint_url=self.endpoint_url)

    def keys(self, prefix: str = "") -> list[str]:
        listing = self.client().list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return sorted(item["Key"] for item in listing.get("Contents", []))

    def storage_config(self, prefix: str) -> dict[str, Any]:
        """A STORAGES entry as settings.py builds it for a bucket, pointed at this server."""
        from deskcomm.settings import file_or_s3_storage

        config = file_or_s3_storage(bucket=self.bucket, prefix=prefix, root=None)  # type: ignore[arg-type]
        config["OPTIONS"]["endpoint_url"] = self.endpoint_url
        return config


@contextmanager
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        s3 = S3Server(f"http://{host}:{port}", f"deskcomm-test-{uuid.uuid4().hex[:8]}")
        s3.client().create_bucket(Bucket=s3.bucket)
        yield s3
    finally:
        server.stop()

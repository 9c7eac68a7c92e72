"""Durable, idempotent partition output: write a temporary file, then rename it.

A sink may ack a record only once its output survives the task; on a POSIX file system
that means written, flushed, fsync'd, and renamed into place (``os.replace`` is atomic),
with the directory fsync'd so the rename itself is durable. A retried or speculative
task writes the same partition to the same final name: whichever rename lands last
wins, and both hold the same rows.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CsvPartitionWriter",
    "S3PartitionWriter",
    "read_csv_parts",
    "read_s3_parts",
    "LocalOutput",
    "S3Output",
    "output_location",
]


@dataclass(frozen=True)
class CsvPartitionWriter:
    """Writes partition ``i`` as ``<directory>/part-<i>.csv`` (``header`` first, then
    ``to_row(value)`` per value). Picklable; the directory must be on a file system the
    executors share with whoever reads the output (local disk in local mode; NFS, EFS
    or a FUSE mount of HDFS/S3 on a cluster)."""

    directory: str
    header: Sequence[str]
    to_row: Callable[[Any], Sequence[Any]] = tuple

    def path(self, index: int) -> Path:
        return Path(self.directory) / f"part-{index:05d}.csv"

    def __call__(self, index: int, values: list[Any]) -> None:
        final = self.path(index)
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
        try:
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(self.header)
                writer.writerows(self.to_row(v) for v in values)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, final)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        _fsync_directory(final.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_csv_parts(directory: str | Path) -> Iterable[dict[str, str]]:
    """Every row of every committed ``part-*.csv`` in ``directory`` (temporary files of
    unfinished writes are skipped)."""
    for part in sorted(Path(directory).glob("part-*.csv")):
        with part.open(newline="", encoding="utf-8") as handle:
            yield from csv.DictReader(handle)


@dataclass(frozen=True)
class S3PartitionWriter:
    """Writes partition ``i`` as one S3 object ``s3://<bucket>/<prefix>/part-<i>.csv``.

    A ``PutObject`` that returned is durably stored, and readers see the whole object or
    none of it, so a sink may ack once it returns; a retried or speculative task puts the
    same content under the same key. Picklable: each call builds its client from these
    fields (``endpoint_url`` and ``region`` default to the environment; credentials come
    from the executor's role or environment, as for DynamoDB).
    """

    bucket: str
    prefix: str
    header: Sequence[str]
    to_row: Callable[[Any], Sequence[Any]] = tuple
    endpoint_url: str | None = None
    region: str | None = None

    def key(self, index: int) -> str:
        return f"{self.prefix.rstrip('/')}/part-{index:05d}.csv"

    def __call__(self, index: int, values: list[Any]) -> None:
        import io

        import boto3

        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer)
        writer.writerow(self.header)
        writer.writerows(self.to_row(v) for v in values)
        client = boto3.session.Session(region_name=self.region).client("s3", endpoint_url=self.endpoint_url)
        client.put_object(Bucket=self.bucket, Key=self.key(index), Body=buffer.getvalue().encode("utf-8"))


def read_s3_parts(client: Any, bucket: str, prefix: str) -> Iterable[dict[str, str]]:
    """Every row of every ``part-*.csv`` object under ``prefix`` in ``bucket``."""
    import io

    paginator = client.get_paginator("list_objects_v2")
    keys = sorted(
        item["Key"]
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/part-")
        for item in page.get("Contents", [])
        if item["Key"].endswith(".csv")
    )
    for key in keys:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
        yield from csv.DictReader(io.StringIO(body, newline=""))


# -- where a job's output goes: a local (or shared) directory, or an S3 prefix ---------


@dataclass(frozen=True)
class LocalOutput:
    """A directory: partition files via :class:`CsvPartitionWriter`, named files written
    to a temporary file and renamed."""

    root: Path

    def writer(
        self, sub: str, header: Sequence[str], to_row: Callable[[Any], Sequence[Any]]
    ) -> CsvPartitionWriter:
        return CsvPartitionWriter(str(self.root.resolve() / sub), header, to_row)

    def read_parts(self, sub: str) -> Iterable[dict[str, str]]:
        return read_csv_parts(self.root / sub)

    def put(self, name: str, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        temp = self.root / f".{name}.tmp"
        temp.write_bytes(data)
        temp.replace(self.root / name)

    def remove(self, sub: str) -> None:
        import shutil

        shutil.rmtree(self.root / sub, ignore_errors=True)

    def describe(self, name: str) -> str:
        return str(self.root / name)


@dataclass(frozen=True)
class S3Output:
    """An S3 prefix: partition files via :class:`S3PartitionWriter`, named files put as
    objects (a put is atomic). ``endpoint_url`` and ``region`` travel to the executors
    with each writer; ``None`` means the environment's (``AWS_ENDPOINT_URL_S3``...)."""

    bucket: str
    prefix: str
    endpoint_url: str | None = None
    region: str | None = None

    def _key(self, name: str) -> str:
        return f"{self.prefix.strip('/')}/{name}" if self.prefix.strip("/") else name

    def client(self) -> Any:
        import boto3

        return boto3.session.Session(region_name=self.region).client("s3", endpoint_url=self.endpoint_url)

    def writer(
        self, sub: str, header: Sequence[str], to_row: Callable[[Any], Sequence[Any]]
    ) -> S3PartitionWriter:
        return S3PartitionWriter(self.bucket, self._key(sub), header, to_row, self.endpoint_url, self.region)

    def read_parts(self, sub: str) -> Iterable[dict[str, str]]:
        return read_s3_parts(self.client(), self.bucket, self._key(sub))

    def put(self, name: str, data: bytes) -> None:
        self.client().put_object(Bucket=self.bucket, Key=self._key(name), Body=data)

    def remove(self, sub: str) -> None:
        client = self.client()
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(sub).rstrip("/") + "/"):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})

    def describe(self, name: str) -> str:
        return f"s3://{self.bucket}/{self._key(name)}"


def output_location(where: str | Path) -> LocalOutput | S3Output:
    """``s3://bucket/prefix`` (endpoint and region from the environment, read here on the
    driver: ``AWS_ENDPOINT_URL_S3``, then ``AWS_ENDPOINT_URL``) or a directory."""
    text = str(where)
    if text.startswith("s3://"):
        bucket, _, prefix = text[len("s3://") :].partition("/")
        if not bucket:
            from ..errors import InvalidConfig

            raise InvalidConfig(f"no bucket in {text!r}")
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        return S3Output(bucket, prefix, endpoint, region)
    return LocalOutput(Path(where))

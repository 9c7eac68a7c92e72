"""Durable, idempotent partition writers for :meth:`TrackedRDD.sink`: CSV part files in a
directory or under an S3 prefix, each written whole by
:meth:`~xor_ack_dynamodb.spark.output.Location.open`; a retried task writes the same
partition to the same name.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..output import Location

__all__ = ["CsvPartitionWriter", "S3PartitionWriter", "csv_writer", "read_csv_parts", "read_s3_parts"]


class _CsvParts:
    """Writes partition ``i`` as ``part-<i>.csv`` (``header``, then ``to_row(value)`` per
    value), whole and durably (:meth:`Location.open`)."""

    header: Sequence[str]
    to_row: Callable[[Any], Sequence[Any]]

    def location(self) -> Location:
        raise NotImplementedError

    def __call__(self, index: int, values: list[Any]) -> None:
        with self.location().open(f"part-{index:05d}.csv") as handle:
            text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
            writer = csv.writer(text)
            writer.writerow(self.header)
            writer.writerows(self.to_row(v) for v in values)
            text.flush()
            text.detach()


@dataclass(frozen=True)
class CsvPartitionWriter(_CsvParts):
    """Writes partition ``i`` as ``<directory>/part-<i>.csv`` (picklable). The directory
    must be shared by the executors and the readers (local disk in local mode; NFS, EFS
    or a FUSE mount on a cluster)."""

    directory: str
    header: Sequence[str]
    to_row: Callable[[Any], Sequence[Any]] = tuple

    def __post_init__(self) -> None:
        # A relative directory means the driver's: executors run elsewhere.
        object.__setattr__(self, "directory", os.path.abspath(self.directory))

    def location(self) -> Location:
        return Location.of(self.directory)


@dataclass(frozen=True)
class S3PartitionWriter(_CsvParts):
    """Writes partition ``i`` as the S3 object ``s3://<bucket>/<prefix>/part-<i>.csv``
    (picklable; one ``PutObject``; ``endpoint_url`` and ``region``: the environment's by
    default)."""

    bucket: str
    prefix: str
    header: Sequence[str]
    to_row: Callable[[Any], Sequence[Any]] = tuple
    endpoint_url: str | None = None
    region: str | None = None

    def location(self) -> Location:
        return Location(f"s3://{self.bucket}/{self.prefix}", self.endpoint_url, self.region)


def csv_writer(
    location: Location, header: Sequence[str], to_row: Callable[[Any], Sequence[Any]]
) -> CsvPartitionWriter | S3PartitionWriter:
    if not location.is_s3:
        return CsvPartitionWriter(location.url, header, to_row)
    bucket, prefix = location.key("")
    return S3PartitionWriter(bucket, prefix, header, to_row, location.endpoint_url, location.region)


def _rows(location: Location, client: Any = None) -> Iterable[dict[str, str]]:
    for name in location.names("part-", ".csv", client):
        body = location.get(name, client) or b""
        yield from csv.DictReader(io.StringIO(body.decode("utf-8"), newline=""))


def read_csv_parts(directory: str | Path) -> Iterable[dict[str, str]]:
    """Every row of every committed ``part-*.csv`` in ``directory``."""
    return _rows(Location.of(directory))


def read_s3_parts(client: Any, bucket: str, prefix: str) -> Iterable[dict[str, str]]:
    """Every row of every ``part-*.csv`` object under ``prefix`` in ``bucket``."""
    return _rows(Location(f"s3://{bucket}/{prefix}"), client)

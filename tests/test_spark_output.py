"""The one durable-write routine and the output location type (``spark/output.py``):
every file of tracked output (partition files of both APIs, the sink's ledger, the word
count's results, a stream's batch reports) is written by ``Location.open``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.spark import CsvPartitionWriter, Location, read_csv_parts


def test_a_local_write_is_renamed_into_place_and_fsynced(tmp_path: Path, monkeypatch: Any) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    where = Location.of(tmp_path / "out")
    assert where.url == str((tmp_path / "out").absolute())
    with where.open("part-00000.csv") as handle:
        handle.write(b"a,b\n")
        assert os.listdir(where.url)[0].startswith(".part-00000.csv.")  # a temporary name first
    assert os.listdir(where.url) == ["part-00000.csv"]
    assert where.get("part-00000.csv") == b"a,b\n" and where.get("missing") is None
    assert len(synced) == 2  # the file, then its directory


def test_a_write_that_raises_leaves_nothing(tmp_path: Path) -> None:
    where = Location.of(tmp_path)
    where.put("kept.json", b"{}")
    with pytest.raises(RuntimeError), where.open("lost.json") as handle:
        handle.write(b"half")
        raise RuntimeError("the task died")
    assert sorted(os.listdir(tmp_path)) == ["kept.json"]


def test_names_children_and_removal(tmp_path: Path) -> None:
    where = Location.of(tmp_path).child("run/attempt-1")
    CsvPartitionWriter(where.url, header=("word",), to_row=lambda w: (w,))(3, ["a", "b"])
    where.put("part-00001.parquet", b"x")
    (Path(where.url) / ".part-00002.csv.tmp").write_bytes(b"unfinished")
    assert where.names("part-") == ["part-00001.parquet", "part-00003.csv"]
    assert where.names("part-", ".csv") == ["part-00003.csv"]
    assert [r["word"] for r in read_csv_parts(where.url)] == ["a", "b"]
    assert where.describe("x.csv") == os.path.join(where.url, "x.csv")
    where.remove()
    assert not os.path.exists(where.url) and os.path.isdir(tmp_path / "run")


def test_an_s3_location_puts_lists_reads_and_removes(monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InvalidConfig):
        Location.of("s3:///no-bucket")
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="parts")
        where = Location.of("s3://parts/out/")
        assert where == Location("s3://parts/out/", None, "us-east-1")
        parts = where.child("attempt-1")
        with parts.open("part-00000.csv") as handle:
            handle.write(b"word\na\n")
        parts.put("part-00001.csv", b"word\nb\n")
        assert parts.key("part-00001.csv") == ("parts", "out/attempt-1/part-00001.csv")
        assert parts.describe("x") == "s3://parts/out/attempt-1/x"
        assert parts.names("part-", ".csv") == ["part-00000.csv", "part-00001.csv"]
        assert parts.get("part-00000.csv") == b"word\na\n" and parts.get("nope") is None
        where.child("other").put("part-00000.csv", b"kept")
        parts.remove()
        assert parts.names("part-") == [] and where.child("other").names("part-") == ["part-00000.csv"]

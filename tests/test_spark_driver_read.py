"""The driver reads small committed output back itself (``spark/frame/driver_read.py``):
the files Spark's reader lists, the same rows, up to ``spark.xorack.driverReadBytes``
and Spark past it; never ``s3://``, a missing or partitioned folder (Spark decides);
Spark reads what the driver fails to read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from xor_ack_dynamodb import AckConfig
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.spark import FrameTracking
from xor_ack_dynamodb.spark.frame import driver_read
from xor_ack_dynamodb.spark.frame.driver_read import (
    BATCH_ROWS,
    DRIVER_READ_BYTES,
    DRIVER_READ_CONF,
    driver_batches,
    driver_files,
    driver_read_limit,
)
from xor_ack_dynamodb.spark.output import Location

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("word", pa.string()), ("count", pa.int64()), ("absent", pa.string())])


def _written(spark: Any, folder: Path) -> list[Path]:
    """Two Parquet part files (``word, count``) written by Spark into ``folder``."""
    rows = [(f"w{i}", i) for i in range(40)]
    spark.createDataFrame(rows, "word string, count bigint").repartition(2).write.parquet(str(folder))
    parts = sorted(folder.glob("part-*.parquet"))
    assert len(parts) == 2 and (folder / "_SUCCESS").exists()
    return parts


@pytest.fixture
def bound(spark: Any) -> Iterator[Callable[[int | str | None], None]]:
    def set_bound(value: int | str | None) -> None:
        if value is None:
            spark.conf.unset(DRIVER_READ_CONF)
        else:
            spark.conf.set(DRIVER_READ_CONF, str(value))

    yield set_bound
    spark.conf.unset(DRIVER_READ_CONF)


def test_the_driver_reads_up_to_the_bound_and_leaves_more_to_spark(
    spark: Any, tmp_path: Path, bound: Any
) -> None:
    parts = _written(spark, tmp_path / "staged")
    size = sum(p.stat().st_size for p in parts)
    where = [Location.of(tmp_path / "staged")]
    assert size <= DRIVER_READ_BYTES
    bound(None)
    assert driver_files(spark, where) == [str(p) for p in parts]
    bound(size)
    assert driver_files(spark, where) == [str(p) for p in parts]
    bound(size - 1)  # one byte past the bound: Spark reads them
    assert driver_files(spark, where) is None
    assert driver_batches(spark, where, SCHEMA) is None
    bound(0)
    assert driver_files(spark, where) is None
    bound("16m")  # as Spark writes sizes
    assert driver_read_limit(spark) == 16 << 20 and driver_files(spark, where) == [str(p) for p in parts]
    bound("512 KiB")
    assert driver_read_limit(spark) == 512 << 10


def test_a_bad_bound_is_refused_before_any_request(spark: Any, bound: Any) -> None:
    bound("1.5m")
    with pytest.raises(InvalidConfig, match="spark.xorack.driverReadBytes"):
        driver_read_limit(spark)
    with pytest.raises(InvalidConfig, match="spark.xorack.driverReadBytes"):
        FrameTracking(spark, AckConfig(table="never-used", region="us-east-1"))


def test_the_driver_reads_the_rows_spark_reads(spark: Any, tmp_path: Path) -> None:
    """Markers, checksums, hidden and half-copied files are not data to Spark's file
    index, nor here (they are not Parquet: reading one would fail); a column no file
    has is null, as with Spark's reader given a schema."""
    folder = tmp_path / "staged"
    _written(spark, folder)
    for junk in ("_stray", ".hidden", "part-9._COPYING_"):
        (folder / junk).write_bytes(b"not parquet")
    batches = driver_batches(spark, [Location.of(folder)], SCHEMA)
    assert batches is not None
    table = pa.Table.from_batches(list(batches))  # text columns dictionary-encoded
    assert pa.types.is_dictionary(table.schema.field("word").type)
    mine = sorted(zip(*(table[c].to_pylist() for c in ("word", "count", "absent")), strict=True))
    theirs = spark.read.schema("word string, count bigint, absent string").parquet(str(folder)).collect()
    assert mine == sorted((r["word"], r["count"], r["absent"]) for r in theirs)
    assert len(mine) == 40 and {a for _, _, a in mine} == {None}


def test_what_the_driver_leaves_to_spark(spark: Any, tmp_path: Path) -> None:
    parts = _written(spark, tmp_path / "staged")
    (tmp_path / "staged" / "part-empty.parquet").write_bytes(b"")  # Spark lists no empty file
    assert driver_files(spark, [Location.of(tmp_path / "staged")]) == [str(p) for p in parts]
    (tmp_path / "staged" / "_k=v").write_bytes(b"x")  # data to Spark's rules (a "=" in a "_" name)
    assert driver_files(spark, [Location.of(tmp_path / "staged")]) is None
    _written(spark, tmp_path / "again")
    assert driver_files(spark, [Location.of(tmp_path / "missing")]) is None  # Spark raises
    assert driver_files(spark, [Location.of("s3://bucket/staged")]) is None
    assert driver_files(spark, [Location.of(tmp_path / "again"), Location.of(tmp_path / "missing")]) is None
    _written(spark, tmp_path / "partitioned" / "day=1")
    assert driver_files(spark, [Location.of(tmp_path / "partitioned")]) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "_SUCCESS").write_bytes(b"")
    assert driver_files(spark, [Location.of(empty)]) == []
    batches = driver_batches(spark, [Location.of(empty)], SCHEMA)
    assert batches is not None and list(batches) == []


def test_the_driver_holds_one_batch_at_a_time(spark: Any, tmp_path: Path) -> None:
    """A file of more rows than a batch comes in several batches, none larger."""
    rows = BATCH_ROWS + 10
    spark.range(rows).selectExpr("cast(id as string) as word", "id as count").coalesce(1).write.parquet(
        str(tmp_path / "big")
    )
    batches = driver_batches(spark, [Location.of(tmp_path / "big")], SCHEMA)
    assert batches is not None
    sizes = [b.num_rows for b in batches]
    assert sum(sizes) == rows and len(sizes) >= 2 and max(sizes) <= BATCH_ROWS


def test_what_the_driver_fails_to_read_spark_reads(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file the driver cannot read (here a corrupt one, which Spark is told to skip)
    is read by Spark: the driver's read raises, and the word count's totals run Spark's
    query instead."""
    from xor_ack_dynamodb.jobs.wordcount.frame import totals

    staged = tmp_path / "w1"
    spark.createDataFrame([("a", 5, "t1")], "word string, count bigint, xor_ack_tag string").write.parquet(
        str(staged)
    )
    (staged / "part-99999-corrupt.parquet").write_bytes(b"PAR1 not really")
    spark.conf.set("spark.sql.files.ignoreCorruptFiles", "true")
    try:
        with caplog.at_level("WARNING", logger="xor_ack_dynamodb.spark"):
            found = totals(spark, [str(staged)], None)
    finally:
        spark.conf.unset("spark.sql.files.ignoreCorruptFiles")
    assert found == {"a": 5}
    assert "the driver could not read" in caplog.text


@pytest.mark.parametrize("acked", [None, ["t1", "t3"]])
def test_the_word_counts_totals_are_the_same_read_by_the_driver_or_by_spark(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, acked: list[str] | None
) -> None:
    """The word count's final count over staged rows in several files and batches:
    only the acked chains' rows and the rows of several files (tag NULL: their write
    holds acked files only) when some did not ack."""
    from spark_helpers import spark_reads_back

    from xor_ack_dynamodb.jobs.wordcount.frame import totals

    rows = [
        ("a", 2, "t1"),
        ("b", 1, "t1"),
        ("a", 5, "t2"),
        ("c", 7, None),
        ("a", 1, "t3"),
        ("\U0001f600", 3, "t3"),
        (None, 4, "t1"),
        ("b", 9, None),
    ]
    schema = "word string, count bigint, xor_ack_tag string"
    staged = [str(tmp_path / "w1"), str(tmp_path / "w2")]
    spark.createDataFrame(rows[:4], schema).repartition(2).write.parquet(staged[0])
    spark.createDataFrame(rows[4:], schema).write.parquet(staged[1])
    monkeypatch.setattr(driver_read, "BATCH_ROWS", 2)
    mine = totals(spark, staged, acked)
    with spark_reads_back(spark):
        theirs = totals(spark, staged, acked)
    assert mine == theirs
    if acked is None:
        assert mine == {"a": 8, "b": 10, "c": 7, "\U0001f600": 3, None: 4}
    else:
        assert mine == {"a": 3, "b": 10, "c": 7, "\U0001f600": 3, None: 4}

"""The driver reads small committed output back itself (``spark/frame/driver_read.py``):
the files Spark's reader lists, the same rows, up to ``spark.xorack.driverReadBytes``
and Spark past it; never ``s3://``, a missing or partitioned folder (Spark decides)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from xor_ack_dynamodb.spark.frame.driver_read import (
    BATCH_ROWS,
    DRIVER_READ_BYTES,
    DRIVER_READ_CONF,
    driver_batches,
    driver_files,
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
def bound(spark: Any) -> Any:
    def set_bound(value: int | None) -> None:
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
    _written(spark, tmp_path / "staged")
    assert driver_files(spark, [Location.of(tmp_path / "missing")]) is None  # Spark raises
    assert driver_files(spark, [Location.of("s3://bucket/staged")]) is None
    assert driver_files(spark, [Location.of(tmp_path / "staged"), Location.of(tmp_path / "missing")]) is None
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

"""Small committed output read in the driver with Arrow instead of by a Spark query (the
word count's totals), when the driver sees the files (a directory, a classic session) and
they total at most ``spark.xorack.driverReadBytes`` (0: off). Otherwise, and on a read
error (:data:`READ_ERRORS`), the functions return None and Spark reads them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ...errors import InvalidConfig
from ..context import is_connect
from ..output import Location

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa
    from pyspark.sql import SparkSession

__all__ = ["DRIVER_READ_CONF", "DRIVER_READ_BYTES", "driver_read_limit", "driver_files", "in_driver", "codes"]

log = logging.getLogger("xor_ack_dynamodb.spark")

T = TypeVar("T")

#: The Spark setting that bounds what the driver reads itself (bytes of Parquet files).
DRIVER_READ_CONF = "spark.xorack.driverReadBytes"
DRIVER_READ_BYTES = 16 << 20
BATCH_ROWS = 65536
#: What a read in the driver may raise where Spark's executors could still read the files.
READ_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def driver_read_limit(spark: SparkSession) -> int:
    """``spark.xorack.driverReadBytes`` in bytes, written as Spark writes sizes (``16m``,
    ``512k``, ``1g``, bytes); :class:`InvalidConfig` for anything else."""
    import re

    text = str(spark.conf.get(DRIVER_READ_CONF, None) or DRIVER_READ_BYTES).strip().lower()
    found = re.fullmatch(r"(-?\d+)\s*([kmgt]?)(?:i?b)?", text)
    if found is None:
        raise InvalidConfig(f"{DRIVER_READ_CONF} must be a size such as 16m, 512k or 1048576, got {text!r}")
    return int(found.group(1)) * _UNITS[found.group(2)]


def _data_files(location: Location) -> list[Path] | None:
    """The data files of a folder as Spark lists them, or None when it is missing or has
    a subfolder (Spark's reader decides then)."""
    folder = Path(location.url)
    if not folder.is_dir():
        return None
    files = []
    for entry in folder.iterdir():
        if "=" in entry.name:
            return None  # a partition folder, or a name Spark's rules treat apart
        if entry.name.startswith(("_", ".")) or entry.name.endswith("._COPYING_"):
            continue  # as Spark's file index leaves them out
        if not entry.is_file():
            return None
        if entry.stat().st_size:  # Spark lists no empty file either
            files.append(entry)
    return sorted(files)


def driver_files(spark: SparkSession, locations: Sequence[Location]) -> list[str] | None:
    """The data files of ``locations`` if the driver reads them itself (module doc)."""
    if is_connect(spark) or any(loc.is_s3 for loc in locations):
        return None
    limit = driver_read_limit(spark)
    if limit <= 0:
        return None
    files: list[Path] = []
    for location in locations:
        found = _data_files(location)
        if found is None:
            return None
        files.extend(found)
    if sum(os.path.getsize(f) for f in files) > limit:
        return None
    return [str(f) for f in files]


def driver_batches(
    spark: SparkSession, locations: Sequence[Location], schema: pa.Schema
) -> Iterator[pa.RecordBatch] | None:
    """The rows of the Parquet files of ``locations`` in ``schema``'s columns (null where
    a file lacks one; text dictionary-encoded, see :func:`codes`), in batches of at most
    :data:`BATCH_ROWS`; or None (module doc)."""
    files = driver_files(spark, locations)
    return None if files is None else _batches(files, schema)


def in_driver(
    spark: SparkSession,
    locations: Sequence[Location],
    schema: pa.Schema,
    aggregate: Callable[[Iterator[pa.RecordBatch]], T],
) -> T | None:
    """``aggregate`` of :func:`driver_batches`, or None (module doc; a read error is
    logged). ``aggregate`` must build its result afresh: it is abandoned on an error."""
    batches = driver_batches(spark, locations, schema)
    if batches is None:
        return None
    try:
        return aggregate(batches)
    except READ_ERRORS as exc:
        where = ", ".join(location.url for location in locations)
        log.warning("the driver could not read %s (%s): Spark reads it", where, exc)
        return None


def _batches(files: Sequence[str], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Text dictionary-encoded, as Parquet stores it: a chain's tag once per file, not per row.
    text = [f.name for f in schema if pa.types.is_string(f.type)]
    for path in files:
        footer = pq.read_metadata(path)
        present = set(footer.schema.to_arrow_schema().names)
        dictionary = [n for n in text if n in present]
        with pq.ParquetFile(path, metadata=footer, read_dictionary=dictionary) as handle:
            for batch in handle.iter_batches(BATCH_ROWS, columns=[n for n in schema.names if n in present]):
                yield pa.RecordBatch.from_arrays(
                    [
                        batch.column(f.name) if f.name in present else pa.nulls(batch.num_rows, f.type)
                        for f in schema
                    ],
                    names=schema.names,
                )


def codes(column: pa.Array) -> tuple[list[Any], npt.NDArray[np.intp]]:
    """``column`` as the values its rows hold (null too) and, per row, its value's index
    (a dictionary-encoded batch may carry its row group's whole dictionary: only the
    values used are listed)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
    dictionary = encoded.dictionary
    indices = np.asarray(pc.fill_null(encoded.indices, len(dictionary)).to_numpy(), dtype=np.int64)
    used, rows = np.unique(indices, return_inverse=True)
    inside = used[used < len(dictionary)]
    values = dictionary.take(pa.array(inside, pa.int64())).to_pylist()
    if len(inside) < len(used):
        values.append(None)  # a null row (its index is past the dictionary's end)
    return values, rows

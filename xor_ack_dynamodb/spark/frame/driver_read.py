"""Small committed output read back in the driver, with Arrow, instead of by a Spark query.

After a tracked write commits, the word count reads what it wrote: its totals. When the
driver itself sees the files (a local or shared directory, a classic session) and they
total at most ``spark.xorack.driverReadBytes`` (default :data:`DRIVER_READ_BYTES`; 0
turns this off), they are read here with pyarrow's Parquet reader and aggregated
vectorized. This reads the files a Spark reader lists (not a name starting with ``_``
or ``.``, nor one ending ``._COPYING_``, nor an empty file) and gives the result Spark's
query gives for the rows a tracked write stages; it only saves a query's planning, code generation
and scheduling: about a second of a 20-second word count on two cores. Larger output,
``s3://``, a folder with partition folders (a name holding ``=``) and Spark Connect
(whose files are the server's) are read by Spark (:func:`driver_files` and
:func:`driver_batches` return None), and so is output the driver fails to read (a file
it may not open, a corrupt one: :data:`READ_ERRORS`, see :func:`in_driver`).
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

__all__ = [
    "DRIVER_READ_CONF",
    "DRIVER_READ_BYTES",
    "BATCH_ROWS",
    "READ_ERRORS",
    "driver_read_limit",
    "driver_files",
    "driver_batches",
    "in_driver",
    "codes",
]

log = logging.getLogger("xor_ack_dynamodb.spark")

T = TypeVar("T")

#: The Spark setting that bounds what the driver reads itself (bytes of Parquet files).
DRIVER_READ_CONF = "spark.xorack.driverReadBytes"
#: Its default: 16 MiB of Parquet files (the word count of 710 files stages 3.5 MB).
DRIVER_READ_BYTES = 16 << 20
#: Rows per batch the driver holds while it reads.
BATCH_ROWS = 65536
#: What a read in the driver may raise where Spark's executors could still read the
#: files: the caller then has Spark read them (nothing was stamped yet).
READ_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def driver_read_limit(spark: SparkSession) -> int:
    """``spark.xorack.driverReadBytes`` in bytes, written as Spark writes sizes (``16m``,
    ``512k``, ``1g``, or a number of bytes; 0 or less: the driver reads nothing).
    :class:`InvalidConfig` for anything else (:class:`~.tracking.FrameTracking` checks
    it when it is made, before any request)."""
    import re

    text = str(spark.conf.get(DRIVER_READ_CONF, None) or DRIVER_READ_BYTES).strip().lower()
    found = re.fullmatch(r"(-?\d+)\s*([kmgt]?)(?:i?b)?", text)
    if found is None:
        raise InvalidConfig(f"{DRIVER_READ_CONF} must be a size such as 16m, 512k or 1048576, got {text!r}")
    return int(found.group(1)) * _UNITS[found.group(2)]


def _data_files(location: Location) -> list[Path] | None:
    """The data files of a staged folder as Spark lists them (names starting with ``_``
    or ``.`` are markers, checksums and temporary files), or None when the folder is
    missing (Spark's reader raises) or has a subfolder (partitioned output: Spark's
    reader decides what it holds)."""
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
    """The data files of ``locations`` if the driver is to read them itself, or None
    where Spark must read them (module doc)."""
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
    """The rows of the Parquet files of ``locations``, ``schema``'s columns (a column a
    file lacks is null, as with Spark's reader given a schema; a text column present
    comes dictionary-encoded, see :func:`codes`), in batches of at most
    :data:`BATCH_ROWS` read in the driver (it holds one batch at a time); or None where
    Spark must read them (module doc)."""
    files = driver_files(spark, locations)
    return None if files is None else _batches(files, schema)


def in_driver(
    spark: SparkSession,
    locations: Sequence[Location],
    schema: pa.Schema,
    aggregate: Callable[[Iterator[pa.RecordBatch]], T],
) -> T | None:
    """``aggregate`` of the rows of ``locations`` (:func:`driver_batches`) when the driver
    reads them itself; None where Spark must read them: the cases of the module doc, and
    output the driver fails to read (:data:`READ_ERRORS`, logged as a warning), which
    Spark's executors may still read. ``aggregate`` must build its result afresh and
    touch nothing else (it is abandoned on such a failure)."""
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

    # Text columns come dictionary-encoded, as Parquet stores them: a chain's tag once
    # per file, not once per row. With batches, the word count's driver peaks at 262 to 278 MiB
    # against 373 MiB reading its staged table whole, as strings (217 MiB without it).
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
    """``column`` as a list of the values its rows hold (null among them, if any) and,
    per row, the index of its value in that list. (A dictionary-encoded column may carry
    its row group's whole dictionary in every batch: only the values used are listed.)"""
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

"""The tracking column ``_xa_chain`` (docs/spark.md, "How the tracking works": the index
of the row's root in the attempt's tags, NULL for a row of several roots), and what a
committed write saw (:class:`Seen`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "CHAIN",
    "TRACKING",
    "Seen",
    "by_chain",
    "local_table",
    "with_tags",
]

CHAIN = "_xa_chain"
TRACKING = (CHAIN,)

#: Up to this many chains a per-chain value is looked up in an array literal; beyond,
#: by a broadcast join.
INLINE_CHAINS = 4096


def by_chain(values: Sequence[str]) -> Column | None:
    """``values[chain]`` of each row: an array literal in the plan, indexed by the row's
    ``CHAIN``, or None for more than :data:`INLINE_CHAINS` values (or none), where the
    caller joins a :func:`local_table` instead (a join hashes every row)."""
    from pyspark.sql import functions as F

    if not 0 < len(values) <= INLINE_CHAINS:
        return None
    # One string literal split by a character no value holds (Spark folds the split into
    # an array literal once): one call into the JVM where an array of literals would
    # take two per value.
    text = "".join(values)
    sep = next((chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text), None)
    if sep is None:
        return None
    # A NULL index is not NULL to element_at (Spark 4.3 gives the last element): a row of
    # several roots is tagged NULL explicitly.
    chain = F.col(CHAIN)
    return F.when(chain.isNotNull(), F.element_at(F.split(F.lit(sep.join(values)), sep), chain + 1))


#: The Arrow type of each Spark type a :func:`local_table` column may have.
_ARROW_TYPES = {"int": "int32", "bigint": "int64", "string": "string", "boolean": "bool_"}


def local_table(spark: SparkSession, columns: Mapping[str, tuple[str, Sequence[Any]]]) -> DataFrame:
    """A small table made in the driver, ``{name: (Spark type, values)}`` (types: int,
    bigint, string, boolean; None is null), as a local relation: its rows are in the plan.
    (``createDataFrame`` of Python rows makes an RDD of pickled rows on a classic
    session, which a broadcast must collect in a Spark job of its own; an Arrow table is
    sent whole, and is a local relation under Spark Connect too.) Any number of rows,
    none included."""
    import pyarrow as pa
    from pyspark.sql import types as T

    arrays = {
        name: pa.array(list(values), getattr(pa, _ARROW_TYPES[kind])())
        for name, (kind, values) in columns.items()
    }
    # The schema given: a Connect client cannot infer one from a table without rows.
    spark_types = {
        "int": T.IntegerType,
        "bigint": T.LongType,
        "string": T.StringType,
        "boolean": T.BooleanType,
    }
    schema = T.StructType([T.StructField(name, spark_types[kind]()) for name, (kind, _) in columns.items()])
    return spark.createDataFrame(pa.table(arrays), schema=schema)


def with_tags(df: DataFrame, column: str, tags: Iterable[str]) -> DataFrame:
    """The rows of ``df`` whose ``column`` is one of ``tags`` (a broadcast semi-join)."""
    from pyspark.sql import functions as F

    keep = local_table(df.sparkSession, {column: ("string", list(tags))})
    return df.join(F.broadcast(keep), column, "left_semi")


@dataclass
class Seen:
    """What a committed write saw, per chain (by tag): the first failure reason (by sort
    order) of the chains whose rows failed, the first note of the noted ones; whether a
    group mixed several roots (``cross``: the write's rows are only right if every one
    of its roots acks); and the rows written."""

    errors: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    cross: bool = False
    rows: int = 0

"""The tracking columns, and what a committed write owes each chain (:class:`ChainXors`).

Every row of a :class:`~xor_ack_dynamodb.spark.frame.TrackedFrame` carries five hidden
columns beside the user's:

``_xa_chain`` (int)
    the chain the row belongs to: its index in the attempt's list of tags (an int keeps
    the rows small through explode, shuffle and hashing; the sink writes the tag);
``_xa_edge`` (bigint)
    the row's edge, a 64-bit word (signed in Spark, the same bits as the unsigned edge);
``_xa_ghost`` (boolean)
    true for a row that carries an edge but no data: a record a filter dropped, a
    parent whose explode had no children, a record that failed, a split's balance. Ghost
    rows reach the sink and are acked with the data, but are never written;
``_xa_err`` (string, nullable)
    why the row's chain must fail (the chain is failed, not stamped);
``_xa_note`` (string, nullable)
    something to report about the root without failing it (bad bytes replaced).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "CHAIN",
    "EDGE",
    "GHOST",
    "ERR",
    "NOTE",
    "TRACKING",
    "ChainXors",
    "to_signed",
    "by_chain",
    "local_table",
    "with_tags",
]

CHAIN = "_xa_chain"
EDGE = "_xa_edge"
GHOST = "_xa_ghost"
ERR = "_xa_err"
NOTE = "_xa_note"
TRACKING = (CHAIN, EDGE, GHOST, ERR, NOTE)

_SIGN = 1 << 63
_WORD = 1 << 64


def to_signed(edge: int) -> int:
    """A 64-bit edge as Spark's signed bigint."""
    return edge - _WORD if edge >= _SIGN else edge


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
    return F.element_at(F.split(F.lit(sep.join(values)), sep), F.col(CHAIN) + 1)


#: The Arrow type of each Spark type a :func:`local_table` column may have.
_ARROW_TYPES = {"int": "int32", "bigint": "int64", "string": "string", "boolean": "bool_"}


def local_table(spark: SparkSession, columns: Mapping[str, tuple[str, Sequence[Any]]]) -> DataFrame:
    """A small table made in the driver, ``{name: (Spark type, values)}`` (types: int,
    bigint, string, boolean; None is null), as a local relation: its rows are in the plan.
    (``createDataFrame`` of Python rows makes an RDD of pickled rows on a classic
    session: broadcasting it took a Spark job of 1.2 s in the word count, against 0.35 s
    for this. An Arrow table is sent whole, and is a local relation under Spark Connect
    too.) Any number of rows, none included."""
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
class ChainXors:
    """Per chain (by tag): the XOR of the edges of its committed rows (in either chain
    mode: the rows keep the XOR invariant, see :mod:`.tracked`), the first failure reason
    and note (by sort order); and the rows of data (not ghosts) written."""

    xors: dict[Any, int] = field(default_factory=dict)
    errors: dict[Any, str] = field(default_factory=dict)
    notes: dict[Any, str] = field(default_factory=dict)
    rows: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "xors": {str(k): f"{v:016x}" for k, v in sorted(self.xors.items())},
            "errors": {str(k): v for k, v in sorted(self.errors.items())},
            "notes": {str(k): v for k, v in sorted(self.notes.items())},
            "rows": self.rows,
        }

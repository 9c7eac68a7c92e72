"""Tracked DataFrames: per-record bookkeeping in the JVM, one stamp per chain per job.

A :class:`TrackedFrame` is a DataFrame with five hidden tracking columns
(:mod:`.columns`). Every operation keeps one invariant, with Spark SQL expressions only
(no Python per record): per chain, the XOR of the edges of its rows is the chain's
outstanding root edge. ``select``, ``with_column`` and ``drop`` keep a row and its edge;
``explode`` (``posexplode_outer``) splits an edge into children that telescope back to
it; ``where`` and ``fail_when`` turn rows into ghosts, which still carry their edges;
``group_by`` never mixes chains; ``join`` refuses a lookup with duplicate keys (checked:
it would repeat edges) and a tracked frame; ``write`` is :mod:`.commit`'s protocol. So
a chain reads zero exactly when every row its root became reached a committed write.

Ghosts and the user's expressions: each operation means its plain PySpark counterpart
applied to each root's rows, under SQL's three-valued logic (a condition that is NULL is
not TRUE). Ghost rows are not rows of the plain pipeline, so they must never decide
anything: every frame keeps a ghost's user columns NULL (:meth:`TrackedFrame._then`), so
an expression evaluated on a ghost meets no data (no ANSI error from a value a filter
dropped), and a condition counts on rows that are not ghosts only (:func:`_holds`): NULL
data would make ``isNull()`` TRUE on every ghost, and fail every root.

See docs/spark.md, "How the tracking works" (each operation's rule) and "Tracked
output: the commit protocol".
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import InvalidConfig
from ..outcomes import PERMANENT
from ..output import Location
from .columns import CHAIN, EDGE, ERR, GHOST, NOTE, TRACKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["TrackedFrame", "TrackedGroups", "WriteResult", "Writes"]

_ARRAY = "_xa_arr"
_COUNT = "_xa_n"
_POS = "_xa_pos"
_MATCH = "_xa_match"


def _name(column: str) -> Column:
    """The column named ``column``, taken literally (a dot is not a struct field)."""
    from pyspark.sql import functions as F

    return F.col("`" + column.replace("`", "``") + "`")


def _holds(condition: Column) -> Column:
    """TRUE on the rows that are not ghosts and on which ``condition`` is TRUE; FALSE
    elsewhere (NULL is not TRUE). ``AND`` stops at a ghost: the condition is not even
    evaluated there."""
    from pyspark.sql import functions as F

    return ~F.col(GHOST) & F.coalesce(condition, F.lit(False))


@dataclass
class WriteResult:
    """What a tracked write did: rows written (ghosts not counted), its write id (its
    ledger is ``<location>/_xor_ack/<write id>.json``), chains stamped, acked and failed
    by the client, and where its rows were staged (removed once published)."""

    rows: int
    write_id: str
    counts: Counter[str] = field(default_factory=Counter)
    staged: str = ""


class Writes(Protocol):
    """What a tracked frame needs of its attempt (:class:`~.attempt.FrameAttempt`)."""

    run_key: int

    def write(
        self,
        frame: TrackedFrame,
        location: str | os.PathLike[str] | Location,
        *,
        format: str,
        tag_column: str,
        publish: bool = True,
        combine: bool = False,
    ) -> WriteResult: ...


class TrackedFrame:
    """A DataFrame whose rows carry their chains; see the module doc. Lazy: nothing runs
    until :meth:`write`."""

    def __init__(self, df: DataFrame, attempt: Writes) -> None:
        self._df = df
        self._attempt = attempt
        #: (frame, keys, aggregates) of the ``group_by().agg()`` that made it, if one did.
        self.grouped: tuple[TrackedFrame, list[str], tuple[Column, ...]] | None = None

    @property
    def df(self) -> DataFrame:
        """The DataFrame itself, tracking columns included (read-only use)."""
        return self._df

    @property
    def columns(self) -> list[str]:
        """The user's columns."""
        return [c for c in self._df.columns if c not in TRACKING]

    @property
    def attempt(self) -> Writes:
        """The attempt these rows belong to (:class:`~.attempt.FrameAttempt`)."""
        return self._attempt

    def _then(self, df: DataFrame) -> TrackedFrame:
        """The frame of ``df``, with its ghosts' user columns NULL (module doc): what an
        operation computed on a ghost (a literal, an aggregate of a ghost group) or kept
        on one (the data of a row a filter dropped) is not data."""
        from pyspark.sql import functions as F

        data = ~F.col(GHOST)
        users = [c for c in df.columns if c not in TRACKING]
        return TrackedFrame(
            df.select(*(F.when(data, _name(c)).alias(c) for c in users), *TRACKING), self._attempt
        )

    def select(self, *columns: str | Column) -> TrackedFrame:
        """Like ``select``; the tracking columns come along (``"*"`` is the user's
        columns)."""
        chosen: list[Any] = []
        for column in columns:
            if isinstance(column, str) and column == "*":
                chosen.extend(self.columns)
            elif isinstance(column, str) and column in TRACKING:
                raise InvalidConfig(f"{column} is a tracking column")
            else:
                chosen.append(column)
        return self._then(self._df.select(*chosen, *TRACKING))

    def with_column(self, name: str, column: Column) -> TrackedFrame:
        """Like ``withColumn``."""
        if name in TRACKING:
            raise InvalidConfig(f"{name} is a tracking column")
        return self._then(self._df.withColumn(name, column))

    def drop(self, *names: str) -> TrackedFrame:
        """Like ``drop`` (tracking columns cannot be dropped)."""
        if set(names) & set(TRACKING):
            raise InvalidConfig("tracking columns cannot be dropped")
        return self._then(self._df.drop(*names))

    def where(self, condition: Column) -> TrackedFrame:
        """Like ``where``: rows for which ``condition`` is not TRUE (FALSE or NULL)
        become ghosts (finished, not written)."""
        from pyspark.sql import functions as F

        return self._then(self._df.withColumn(GHOST, F.col(GHOST) | ~_holds(condition)))

    filter = where

    def fail_when(self, condition: Column, reason: str | Column, *, permanent: bool = False) -> TrackedFrame:
        """Rows for which ``condition`` is TRUE (not FALSE, not NULL; never a ghost)
        fail their chain with ``reason`` (the first reason by sort order is kept per
        chain) and are not written. With ``permanent`` the root is not replayed."""
        from pyspark.sql import functions as F

        text = F.lit(reason) if isinstance(reason, str) else reason
        if permanent:
            text = F.concat(F.lit(PERMANENT), text)
        hit = _holds(condition)
        return self._then(
            self._df.withColumns(
                {
                    ERR: F.coalesce(F.col(ERR), F.when(hit, text)),
                    GHOST: F.col(GHOST) | hit,
                }
            )
        )

    def explode(self, array: str | Column, alias: str, *, position: str | None = None) -> TrackedFrame:
        """One row per element of ``array`` (named ``alias``; its index as ``position``
        if given), like ``explode``/``posexplode`` (not ``_outer``): a NULL or empty
        array gives no row. The other columns are kept, except ``array`` itself when it
        is given as a column name (as ``select(explode(...))`` would not repeat it on
        every child: select it under another name first to keep it). Edges telescope
        (module doc)."""
        from pyspark.sql import functions as F

        for name in (alias, position):
            if name in TRACKING:
                raise InvalidConfig(f"{name} is a tracking column")
        values = F.col(array) if isinstance(array, str) else array
        # The array's size is taken before the generator: referenced after it, it would
        # make Spark carry the whole array into every child row.
        base = self._df.withColumn(_ARRAY, F.when(~F.col(GHOST), values)).withColumn(_COUNT, F.size(_ARRAY))
        dropped = {_ARRAY, alias, position, array if isinstance(array, str) else None}
        kept = [c for c in base.columns if c not in dropped]
        exploded = base.select(*kept, F.posexplode_outer(_ARRAY).alias(_POS, alias))
        edge, pos, count = F.col(EDGE), F.col(_POS), F.col(_COUNT)
        run = F.lit(self._attempt.run_key).cast("bigint")
        head = F.when(pos == 0, edge).otherwise(F.xxhash64(run, edge, pos))
        tail = F.when(pos + 1 == count, F.lit(0).cast("bigint")).otherwise(F.xxhash64(run, edge, pos + 1))
        out = exploded.withColumns(
            {
                EDGE: F.when(pos.isNull(), edge).otherwise(head.bitwiseXOR(tail)),
                GHOST: F.col(GHOST) | pos.isNull(),
            }
        )
        out = out.withColumnRenamed(_POS, position) if position else out.drop(_POS)
        return self._then(out.drop(_COUNT))

    def group_by(self, *keys: str) -> TrackedGroups:
        """Group per chain and by ``keys`` (column names, at least one); see the module
        doc. A NULL key is a group, as in Spark. With no key, plain Spark's global
        aggregate gives one row even for a root without rows, which a per-chain grouping
        cannot: refused (group by a column, or aggregate the published rows)."""
        if not keys:
            raise InvalidConfig(
                "group_by needs at least one key column (a global aggregate per root is not supported)"
            )
        for key in keys:
            if not isinstance(key, str) or key in TRACKING:
                raise InvalidConfig(f"group_by takes the names of user columns, got {key!r}")
        return TrackedGroups(self, keys)

    def join(
        self, lookup: DataFrame, on: str | Sequence[str], how: str = "inner", *, check: bool = True
    ) -> TrackedFrame:
        """Join with an untracked ``lookup`` that has at most one row per ``on`` key.
        ``how`` is ``inner`` (rows without a match become ghosts) or ``left`` (kept, the
        lookup's columns NULL); a NULL key matches nothing, as in Spark. With
        ``check`` (default), a small job counts duplicate keys first and
        :class:`InvalidConfig` is raised if there are any."""
        from pyspark.sql import functions as F

        if isinstance(lookup, TrackedFrame):  # type: ignore[unreachable]
            raise InvalidConfig("joining two tracked frames would put two chains in one row; not supported")
        if how not in ("inner", "left"):
            raise InvalidConfig(f"how must be 'inner' or 'left', got {how!r}")
        keys = [on] if isinstance(on, str) else list(on)
        if set(lookup.columns) & set(TRACKING):
            raise InvalidConfig("the lookup has tracking columns")
        shared = (set(lookup.columns) & set(self.columns)) - set(keys)
        if shared:
            raise InvalidConfig(
                f"the lookup's columns {sorted(shared)} are also the frame's: rename them first"
            )
        if check and lookup.groupBy(*keys).count().where(F.col("count") > 1).limit(1).count():
            raise InvalidConfig(f"the lookup has more than one row for some key of {keys}")
        joined = self._df.join(lookup.withColumn(_MATCH, F.lit(True)), on=keys, how="left")
        if how == "inner":
            joined = joined.withColumn(GHOST, F.col(GHOST) | F.col(_MATCH).isNull())
        return self._then(joined.drop(_MATCH))

    def transform(self, fn: Callable[[DataFrame], DataFrame]) -> TrackedFrame:
        """Apply ``fn`` to the DataFrame itself, for operations this class lacks. ``fn``
        must keep every row exactly once and the tracking columns unchanged (a map, not
        a filter: use :meth:`where`)."""
        out = fn(self._df)
        missing = [c for c in TRACKING if c not in out.columns]
        if missing:
            raise InvalidConfig(f"transform dropped tracking columns {missing}")
        return self._then(out)

    def write(
        self,
        location: str | os.PathLike[str] | Location,
        *,
        format: str = "parquet",
        tag_column: str = "xor_ack_tag",
        publish: bool = True,
        combine: bool = False,
    ) -> WriteResult:
        """Run the job: write the rows that are not ghosts (user columns and the chain's
        tag as ``tag_column``) to ``location`` (a directory, or ``s3://`` where Spark has
        an S3 file system), as Parquet or CSV, through Spark's writer and its commit
        protocol; ack; publish the acked chains' rows into ``location`` (see
        :mod:`.commit`; ``publish=False`` leaves them staged, for a job that reads them
        there). One tracked write per attempt. Raises
        :class:`~xor_ack_dynamodb.spark.output.OutputRefused` before any task for a
        write that cannot be done (a user column named ``tag_column``, another format, a
        location Spark cannot write). ``combine``: see :meth:`.attempt.FrameAttempt.write`."""
        return self._attempt.write(
            self, location, format=format, tag_column=tag_column, publish=publish, combine=combine
        )


class TrackedGroups:
    """``TrackedFrame.group_by(...)``: call :meth:`agg`."""

    def __init__(self, frame: TrackedFrame, keys: Sequence[str]) -> None:
        self.frame = frame
        self.keys = list(keys)

    def agg(self, *exprs: Column) -> TrackedFrame:
        """Aggregate per chain and key (a ghost's keys are NULL, and its group is
        apart from the data's); the ghost rows of a chain collapse into one per
        failure reason and note. The reason and note are grouping keys (null on every
        row that is not failing or noted), not aggregates: a string aggregate (``max``)
        would force Spark's sort-based aggregation over every row."""
        from pyspark.sql import functions as F

        ghost = F.col(GHOST)
        grouping = [
            F.col(CHAIN),
            ghost,
            *(_name(k) for k in self.keys),
            F.col(ERR),
            F.col(NOTE),
        ]
        out = self.frame.df.groupBy(*grouping).agg(*exprs, F.bit_xor(EDGE).alias(EDGE))
        grouped = self.frame._then(out)
        grouped.grouped = (self.frame, self.keys, exprs)
        return grouped

    def count(self, name: str = "count") -> TrackedFrame:
        from pyspark.sql import functions as F

        return self.agg(F.count(F.lit(1)).alias(name))

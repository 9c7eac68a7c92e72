"""Tracked DataFrames (docs/spark.md, "How the tracking works"). Failures and notes are
observed as *sets*, right however often a task runs; a frame is a recipe built again for
each write, so an earlier action cannot consume a write's observations.
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
from .columns import CHAIN, TRACKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["TrackedFrame", "TrackedGroups", "WriteResult", "Writes", "Probes"]

_LOW = "_xa_low"
_HIGH = "_xa_high"


def _users(*names: object) -> None:
    """Refuse a tracking column's name where a user column is named."""
    for name in names:
        if isinstance(name, str) and name in TRACKING:
            raise InvalidConfig(f"{name} is a tracking column")


def _name(column: str) -> Column:
    """The column named ``column``, taken literally (a dot is not a struct field)."""
    from pyspark.sql import functions as F

    return F.col("`" + column.replace("`", "``") + "`")


def observed(observation: Any) -> dict[str, Any] | None:
    """What an observation collected once its query ran, or None when Spark did not run
    it: optimized away (completed with an empty row, which a classic session refuses to
    convert) or on no branch of what ran (never completed). A classic session completes
    it from a listener of the query's end: the listeners are drained first."""
    from pyspark import SparkContext

    handle = getattr(observation, "_jo", None)
    if handle is not None and not handle.future().isCompleted():
        context = SparkContext._active_spark_context
        if context is not None:
            context._jsc.sc().listenerBus().waitUntilEmpty()
        if not handle.future().isCompleted():
            return None
    try:
        got = observation.get
    except Exception:
        return None
    return dict(got) if got else None


class Probes:
    """The side channel of one build of a frame (module doc): an Observation per
    ``fail_when``, source note and ``group_by`` across roots."""

    def __init__(self) -> None:
        self._probes: list[tuple[str, Any, DataFrame, str]] = []

    def observe(self, df: DataFrame, kind: str, text: Column) -> DataFrame:
        """``df`` with a column :meth:`column` of ``text`` (NULL on rows not picked),
        whose (root, text) pairs :meth:`read` gets after the write. ``kind``: ``"fail"``,
        ``"note"`` or ``"mixed"`` (a group of several roots)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        name = f"_xa_{kind}{len(self._probes)}"
        marked = df.withColumn(name, text)
        picked = F.when(F.col(name).isNotNull(), F.struct(F.col(CHAIN).alias("c"), F.col(name).alias("t")))
        observation = Observation()
        self._probes.append((kind, observation, marked, name))
        return marked.observe(observation, F.collect_set(picked).alias("s"))

    def column(self) -> str:
        """The name of the column the last :meth:`observe` added."""
        return self._probes[-1][3]

    def read(self, chains: int) -> tuple[dict[int, str], dict[int, str], bool]:
        """After the write: per root (index), its first failure reason and note (by sort
        order), and whether a group mixed roots. A failing row of several roots fails
        all ``chains`` roots."""
        from pyspark.sql import functions as F

        found: dict[str, dict[int, str]] = {"fail": {}, "note": {}, "mixed": {}}
        for kind, observation, marked, name in self._probes:
            got = observed(observation)
            pairs = None if got is None else list(got["s"] or [])
            if pairs is None:
                rows = marked.where(F.col(name).isNotNull()).select(CHAIN, name).distinct().collect()
                pairs = [(row[0], row[1]) for row in rows]
            into = found[kind]
            for chain, text in pairs:
                for each in range(chains) if chain is None and kind == "fail" else (chain,):
                    into[each] = min(into.get(each, text), text)
        return found["fail"], found["note"], bool(found["mixed"])


@dataclass
class WriteResult:
    """What a tracked write did: rows written, its write id (ledger
    ``<location>/_xor_ack/<write id>.json``), the driver's counts, where its rows were
    staged, and how many times the job ran (more than once when roots failed under a
    cross-root aggregate)."""

    rows: int
    write_id: str
    counts: Counter[str] = field(default_factory=Counter)
    staged: str = ""
    runs: int = 1


class Writes(Protocol):
    """What a tracked frame needs of its attempt (:class:`~.attempt.FrameAttempt`)."""

    #: ``group_by`` per root by default (chains may end at different times).
    per_root: bool

    def write(
        self,
        frame: TrackedFrame,
        location: str | os.PathLike[str] | Location,
        *,
        format: str,
        tag_column: str,
        publish: bool = True,
    ) -> WriteResult: ...


Build = Callable[[Probes], "DataFrame"]


class TrackedFrame:
    """A DataFrame whose rows carry their root; see the module doc. Lazy: nothing runs
    until :meth:`write`."""

    def __init__(self, build: Build, attempt: Writes) -> None:
        self._build = build
        self._attempt = attempt

    def build(self, probes: Probes) -> DataFrame:
        """The frame's DataFrame, its observations registered with ``probes``."""
        return self._build(probes)

    @property
    def df(self) -> DataFrame:
        """A build of the DataFrame, root column included (an action on it does not
        touch what a write observes)."""
        return self.build(Probes())

    @property
    def columns(self) -> list[str]:
        """The user's columns."""
        return [c for c in self.df.columns if c not in TRACKING]

    def _then(self, step: Callable[[DataFrame, Probes], DataFrame]) -> TrackedFrame:
        before = self._build
        return TrackedFrame(lambda probes: step(before(probes), probes), self._attempt)

    def select(self, *columns: str | Column) -> TrackedFrame:
        """Like ``select``; the root column comes along (``"*"`` is the user's columns)."""
        _users(*columns)

        def step(df: DataFrame, _: Probes) -> DataFrame:
            users = [c for c in df.columns if c not in TRACKING]
            chosen = [u for c in columns for u in (users if isinstance(c, str) and c == "*" else [c])]
            return df.select(*chosen, CHAIN)

        return self._then(step)

    def with_column(self, name: str, column: Column) -> TrackedFrame:
        _users(name)
        return self._then(lambda df, _: df.withColumn(name, column))

    def drop(self, *names: str) -> TrackedFrame:
        _users(*names)
        return self._then(lambda df, _: df.drop(*names))

    def where(self, condition: Column) -> TrackedFrame:
        return self._then(lambda df, _: df.where(condition))

    filter = where

    def fail_when(self, condition: Column, reason: str | Column, *, permanent: bool = False) -> TrackedFrame:
        """Rows on which ``condition`` is TRUE fail their root with ``reason`` (the first
        by sort order is kept) and go no further; ``permanent``: not replayed."""
        from pyspark.sql import functions as F

        text = F.lit(reason) if isinstance(reason, str) else reason
        if permanent:
            text = F.concat(F.lit(PERMANENT), text)

        def step(df: DataFrame, probes: Probes) -> DataFrame:
            marked = probes.observe(df, "fail", F.when(F.coalesce(condition, F.lit(False)), text))
            name = probes.column()
            return marked.where(F.col(name).isNull()).drop(name)

        return self._then(step)

    def explode(self, array: str | Column, alias: str, *, position: str | None = None) -> TrackedFrame:
        """One row per element of ``array`` (named ``alias``; its index as ``position``),
        like ``explode``/``posexplode``: a NULL or empty array gives no row. The other
        columns are kept, except ``array`` given by name."""
        from pyspark.sql import functions as F

        _users(alias, position)
        values = F.col(array) if isinstance(array, str) else array
        made = F.posexplode(values).alias(position, alias) if position else F.explode(values).alias(alias)
        dropped = {alias, position, array if isinstance(array, str) else None}
        return self._then(lambda df, _: df.select(*(_name(c) for c in df.columns if c not in dropped), made))

    def group_by(self, *keys: str, per_root: bool | None = None) -> TrackedGroups:
        """Group by ``keys`` (column names; none: one group) across roots, as Spark does;
        a group whose rows all came from one root keeps it, the others are rows of
        several roots (their write stands only if all its roots ack). ``per_root``: per
        root and key (at least one key), the default where roots may end at different
        times (:attr:`Writes.per_root`)."""
        for key in keys:
            if not isinstance(key, str) or key in TRACKING:
                raise InvalidConfig(f"group_by takes the names of user columns, got {key!r}")
        apart = self._attempt.per_root if per_root is None else per_root
        if apart and not keys:
            raise InvalidConfig(
                "group_by per root needs at least one key column "
                "(a global aggregate per root is not supported)"
            )
        return TrackedGroups(self, keys, per_root=apart)

    def join(
        self, lookup: DataFrame, on: str | Sequence[str], how: str = "inner", *, check: bool = True
    ) -> TrackedFrame:
        """Join with an untracked ``lookup`` of at most one row per ``on`` key (``how``:
        ``inner`` or ``left``); with ``check``, a small job refuses duplicate keys first
        (:class:`InvalidConfig`)."""
        from pyspark.sql import functions as F

        if isinstance(lookup, TrackedFrame):  # type: ignore[unreachable]
            raise InvalidConfig("joining two tracked frames would put two roots in one row; not supported")
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
        n = [f"_{i}" for i in range(len(keys) + 1)]  # fresh names, by position: a key may be "count"
        if check and lookup.groupBy(*keys).count().toDF(*n).where(F.col(n[-1]) > 1).limit(1).count():
            raise InvalidConfig(f"the lookup has more than one row for some key of {keys}")
        return self._then(lambda df, _: df.join(lookup, on=keys, how=how))

    def transform(self, fn: Callable[[DataFrame], DataFrame]) -> TrackedFrame:
        """``fn`` of the DataFrame itself, which must keep the root column as it is."""
        if CHAIN not in fn(self.df).columns:
            raise InvalidConfig(f"transform dropped the tracking column {CHAIN}")
        return self._then(lambda df, _: fn(df))

    def write(
        self,
        location: str | os.PathLike[str] | Location,
        *,
        format: str = "parquet",
        tag_column: str = "xor_ack_tag",
        publish: bool = True,
    ) -> WriteResult:
        """Run the job: write the rows (user columns and the root's tag as
        ``tag_column``, NULL on a row of several roots) to ``location`` (a directory, or
        ``s3://`` where Spark has an S3 file system) as Parquet or CSV through Spark's
        commit protocol; ack; publish (``publish=False`` leaves the rows staged). One per
        attempt; :class:`~xor_ack_dynamodb.spark.output.OutputRefused` before any task
        for a write that cannot be done."""
        return self._attempt.write(self, location, format=format, tag_column=tag_column, publish=publish)


class TrackedGroups:
    """``TrackedFrame.group_by(...)``: call :meth:`agg`."""

    def __init__(self, frame: TrackedFrame, keys: Sequence[str], *, per_root: bool) -> None:
        self.frame = frame
        self.keys = list(keys)
        self.per_root = per_root

    def agg(self, *exprs: Column) -> TrackedFrame:
        """Aggregate (:meth:`TrackedFrame.group_by`). Across roots, a group's root is the
        least and greatest of its rows' when they agree (a NULL counts as several), else
        NULL: two aggregates beside the user's; whether a group mixed roots is observed."""
        from pyspark.sql import functions as F

        keys = [_name(k) for k in self.keys]
        if self.per_root:
            return self.frame._then(lambda df, _: df.groupBy(F.col(CHAIN), *keys).agg(*exprs))
        root = F.coalesce(F.col(CHAIN), F.lit(-1))
        low, high = F.col(_LOW), F.col(_HIGH)

        def step(df: DataFrame, probes: Probes) -> DataFrame:
            grouped = df.groupBy(*keys).agg(*exprs, F.min(root).alias(_LOW), F.max(root).alias(_HIGH))
            one = F.when((low == high) & (low >= 0), low).cast("int")
            # Observed here, not at the write: a later filter may drop a group whose
            # rows of a failed root changed it, and the write would not know.
            mixed = F.when(F.col(CHAIN).isNull(), F.lit("several roots"))
            return probes.observe(grouped.withColumn(CHAIN, one).drop(_LOW, _HIGH), "mixed", mixed).drop(
                probes.column()
            )

        return self.frame._then(step)

    def count(self, name: str = "count") -> TrackedFrame:
        from pyspark.sql import functions as F

        return self.agg(F.count(F.lit(1)).alias(name))

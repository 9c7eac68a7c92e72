"""Tracked output: Spark's own writer and file commit protocol, then a publish of the
acked rows.

A tracked write (:meth:`~.attempt.FrameAttempt.write`) stages every row under
``<location>/_xor_ack/<write id>/`` (names of its own: a second write never touches
another's files; Spark's commit protocol keeps one attempt per partition), reads back
what committed (the chains are stamped with that, so an ack is about the rows on disk),
writes the ledger ``<write id>.json`` whole before any stamp, and publishes the acked
chains' rows into ``<location>`` under a claim (``<write id>.published``, created only
if absent: of two publishers one wins). Guarantees: no file an ack counts on is
replaced after the ack, and a reader never sees rows of a root that did not ack. A
crash between the ack and the end of the publish loses nothing: :func:`recover` (run
before every tracked write into the location) publishes each ledger whose chains have
all ended, or finishes a claimed publish.

See docs/spark.md, "Tracked output: the commit protocol".
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ..output import Location, OutputRefused
from .columns import CHAIN, EDGE, ERR, GHOST, NOTE, TRACKING, ChainXors, by_chain, local_table, with_tags
from .driver_read import chain_xors, in_driver

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from ...interfaces import AckTracker

__all__ = ["SINK_FORMATS", "STAGING", "Staged", "check_write", "stage", "publish", "recover", "can_write"]

log = logging.getLogger("xor_ack_dynamodb.spark")

SINK_FORMATS = ("parquet", "csv")
#: The folder of a location that holds staged writes, ledgers and claims.
STAGING = "_xor_ack"


def can_write(spark: SparkSession, location: Location) -> bool:
    """Whether Spark has a file system for ``location`` (always for a directory; for
    ``s3://`` on EMR, not from the pip package: see :func:`.sources.has_filesystem`)."""
    from .sources import has_filesystem

    return not location.is_s3 or has_filesystem(spark, "s3")


def check_write(
    spark: SparkSession, columns: Sequence[str], location: Location, format: str, tag_column: str
) -> None:
    """Raise :class:`OutputRefused` for a write that cannot be done, before any task runs:
    a format the sink does not write, a tag column that is a user column or a tracking
    column, a location that is a file, or one Spark has no file system for."""
    import os

    if format not in SINK_FORMATS:
        raise OutputRefused(f"format must be one of {SINK_FORMATS}, got {format!r}")
    if not tag_column or tag_column in TRACKING or tag_column.startswith("_"):
        raise OutputRefused(f"{tag_column!r} cannot be the tag column (names starting with _ are hidden)")
    if tag_column in columns:
        raise OutputRefused(
            f"the frame already has a column {tag_column!r}: the sink writes the chain's tag under that "
            f"name (drop or rename the column, or pass tag_column=...)"
        )
    if not location.is_s3 and os.path.isfile(location.url):
        raise OutputRefused(f"{location.url} is a file, not a directory")
    if not can_write(spark, location):
        raise OutputRefused(
            f"this Spark has no file system for {location.url} (no S3A or EMRFS on its class path): "
            "write to a directory every node sees, or run where Spark reads and writes s3:// (EMR)"
        )


@dataclass(frozen=True)
class Staged:
    """A staged write: where it is, its id, the tag column and the user's columns."""

    location: Location
    write_id: str
    tag_column: str
    columns: tuple[str, ...]
    format: str

    @property
    def staging(self) -> Location:
        return self.location.child(f"{STAGING}/{self.write_id}")

    @property
    def meta(self) -> Location:
        return self.location.child(STAGING)


def new_write_id(owner: str, attempt: int) -> str:
    """A write id: the run's owner (``/`` made safe), the attempt, 48 random bits."""
    return f"{owner.replace('/', '~')}-a{attempt}-{secrets.token_hex(6)}"


def stage(df: DataFrame, staged: Staged, tags: Sequence[str], *, publish: bool = True) -> ChainXors:
    """Steps 1-3 of the module doc: write ``df`` (a tracked frame, chain ``i`` tagged
    ``tags[i]``) with Spark's Parquet writer into the staging folder, read back what
    committed, write the ledger (``publish=False``: a write whose rows are read where
    they are staged, which :func:`recover` leaves alone). Returns what the write owes
    each chain."""
    from pyspark.sql import functions as F

    spark = df.sparkSession
    tag = by_chain(tags)
    if tag is not None:
        tagged = df.withColumn(staged.tag_column, tag)
    else:
        names = local_table(spark, {CHAIN: ("int", range(len(tags))), staged.tag_column: ("string", tags)})
        tagged = df.join(F.broadcast(names), CHAIN)
    rows = tagged.select(*staged.columns, staged.tag_column, EDGE, GHOST, ERR, NOTE)
    rows.write.mode("append").parquet(staged.staging.url)
    xors = read_back(spark, staged)
    ledger = {
        "write": staged.write_id,
        "tag_column": staged.tag_column,
        "columns": list(staged.columns),
        "format": staged.format,
        "tags": list(tags),
        "publish": publish,
        **xors.to_json(),
    }
    staged.meta.put(f"{staged.write_id}.json", json.dumps(ledger, ensure_ascii=False).encode("utf-8"))
    return xors


_KEYS = "_xa_keys"


def combined(
    df: DataFrame, keys: Sequence[str], exprs: Sequence[Column], columns: Sequence[str]
) -> DataFrame:
    """The staged rows of a ``combine`` write of ``group_by(*keys).agg(*exprs)`` over
    ``df`` (user ``columns``), in one aggregation of each row twice (as grouping sets):
    by ``keys`` across roots (plain Spark's rows; chain 0, edge 0), and by chain (one
    ghost per chain, reason and note with its edges' XOR: what a per-root staging owes
    it). Kept only if every root acks (:meth:`~.attempt.FrameAttempt.write`)."""
    from pyspark.sql import functions as F

    def name(column: str) -> Column:
        return F.col("`" + column.replace("`", "``") + "`")

    users = [c for c in df.columns if c not in TRACKING]
    by_key = F.col(_KEYS)
    both = df.select("*", F.explode(F.array(F.lit(True), F.lit(False))).alias(_KEYS))
    split = both.select(
        *(F.when(by_key, name(c)).alias(c) for c in users),
        by_key,
        F.when(by_key, F.col(GHOST)).alias(GHOST),
        *(F.when(~by_key, F.col(c)).alias(c) for c in (CHAIN, ERR, NOTE)),
        F.when(~by_key, F.col(EDGE)).otherwise(F.lit(0).cast("bigint")).alias(EDGE),
    )
    groups = split.groupBy(by_key, *(name(k) for k in keys), GHOST, CHAIN, ERR, NOTE).agg(
        *exprs, F.bit_xor(EDGE).alias(EDGE)
    )
    data = by_key & ~F.col(GHOST)
    return groups.select(
        *(F.when(data, name(c)).alias(c) for c in columns),
        F.coalesce(F.col(CHAIN), F.lit(0)).alias(CHAIN),
        F.col(EDGE),
        F.coalesce(F.col(GHOST), F.lit(True)).alias(GHOST),
        F.col(ERR),
        F.col(NOTE),
    )


def read_back(spark: SparkSession, staged: Staged) -> ChainXors:
    """Per chain, what the committed staged files hold: read by the driver when it sees
    them and they are small (:mod:`.driver_read`), otherwise by a column-pruned
    aggregation in Spark."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    tag = staged.tag_column
    columns = pa.schema(
        [(tag, pa.string()), (EDGE, pa.int64()), (GHOST, pa.bool_()), (ERR, pa.string()), (NOTE, pa.string())]
    )
    owed = in_driver(spark, [staged.staging], columns, partial(chain_xors, tag=tag))
    if owed is not None:
        return owed
    # Given the columns it needs, the reader neither infers a schema (a job of its own)
    # nor reads the user's columns.
    quoted = "`" + tag.replace("`", "``") + "`"
    schema = f"{quoted} string, {EDGE} bigint, {GHOST} boolean, {ERR} string, {NOTE} string"
    # Grouped first by chain, reason and note (a hash aggregate over every staged row),
    # then by chain alone: a string min over all rows would make Spark sort every one
    # (a sort-based aggregate); over the groups it sorts a few per chain.
    groups = (
        spark.read.schema(schema)
        .parquet(staged.staging.url)
        .groupBy(tag, ERR, NOTE)
        .agg(F.bit_xor(EDGE).alias("x"), F.count_if(~F.col(GHOST)).alias("r"))
    )
    found = (
        groups.groupBy(tag)
        .agg(
            F.bit_xor("x").alias("x"),
            F.min(ERR).alias("e"),
            F.min(NOTE).alias("n"),
            F.sum("r").alias("r"),
        )
        .collect()
    )
    out = ChainXors()
    for row in found:
        name = row[tag]
        out.xors[name] = row["x"] % (1 << 64)
        if row["e"] is not None:
            out.errors[name] = row["e"]
        if row["n"] is not None:
            out.notes[name] = row["n"]
        out.rows += row["r"]
    return out


def _claims(staged: Staged) -> list[dict[str, Any]]:
    """The publish rounds claimed so far (``<write id>.published``, ``.published.2``...)."""
    meta = staged.meta
    names = [n for n in meta.names(f"{staged.write_id}.published", "") if "/" not in n]
    return [json.loads((meta.get(n) or b"{}").decode("utf-8")) for n in sorted(names, key=len)]


def publish(spark: SparkSession, staged: Staged, acked: Iterable[str], *, keep_staging: bool = False) -> None:
    """Step 5 of the module doc: the rows of the ``acked`` chains not published yet, in
    one claimed round (the claim lists their tags); the staged rows are removed unless
    ``keep_staging`` (chains not acked yet may be later: a later round publishes them)."""
    from pyspark.sql import functions as F

    meta = staged.meta
    claims = _claims(staged)
    done = {t for c in claims for t in c.get("tags", [])}
    chosen = sorted(set(acked) - done)
    if chosen or not claims:
        claim = f"{staged.write_id}.published" + (f".{len(claims) + 1}" if claims else "")
        source = f"{staged.write_id}.pub-{secrets.token_hex(4)}"
        if chosen:
            staged_rows = spark.read.parquet(staged.staging.url).where(~F.col(GHOST))
            rows = with_tags(staged_rows, staged.tag_column, chosen)
            writer = rows.select(*staged.columns, staged.tag_column).write.mode("append")
            writer.format(staged.format).options(**({"header": "true"} if staged.format == "csv" else {}))
            writer.save(meta.child(source).url)
        body = json.dumps({"from": source, "tags": chosen}, ensure_ascii=False).encode("utf-8")
        if not meta.claim(claim, body):
            meta.child(source).remove()
            source = json.loads((meta.get(claim) or b"{}").decode("utf-8")).get("from", source)
        _move(meta.child(source), staged.location)
        meta.child(source).remove()
    if not keep_staging:
        staged.staging.remove()


def _move(source: Location, into: Location) -> None:
    names = [n for n in source.names("part-") if not n.endswith(".crc")]
    for name in names:
        source.move(name, into)


def recover(spark: SparkSession, location: Location, tracker: AckTracker) -> int:
    """Publish what earlier writes into ``location`` acked and did not publish: finish
    the moves of a claimed round, publish a write whose run died between its acks and
    its publish once its chains have all ended (a chain still pending may be acked by
    its run any moment: that ledger is left for later), and publish the chains acked
    since of a write that kept its staged rows (handed chains, open stream roots).
    Returns how many rounds were published or finished."""
    meta = location.child(STAGING)
    done = 0
    for name in meta.names("", ".json"):
        write_id = name[: -len(".json")]
        if "/" in write_id:
            continue
        ledger = json.loads((meta.get(name) or b"{}").decode("utf-8"))
        if not ledger.get("columns") or ledger.get("publish") is False:
            continue
        staged = Staged(location, write_id, ledger["tag_column"], tuple(ledger["columns"]), ledger["format"])
        claims = _claims(staged)
        for claim in claims:
            source = meta.child(claim["from"])
            if source.names("part-"):
                _move(source, location)
                source.remove()
                done += 1
        if not staged.staging.names(""):
            continue
        published = {t for c in claims for t in c.get("tags", [])}
        states = tracker.status_many(ledger["tags"]) if ledger["tags"] else {}
        pending = any(s.state == "pending" for s in states.values())
        if pending and not claims:
            continue  # its run may be acking it now: its first publish is the run's own
        acked = {t for t, s in states.items() if s.state == "acked"}
        if acked - published or not claims:
            log.warning(
                "publishing write %s of %s: %d chain(s)", write_id, location.url, len(acked - published)
            )
            publish(spark, staged, acked, keep_staging=pending)
            done += 1
        elif not pending:
            staged.staging.remove()
    return done

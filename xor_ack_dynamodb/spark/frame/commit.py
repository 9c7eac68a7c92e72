"""Tracked output (docs/spark.md, "Tracked output: the commit protocol", which gives the
steps): stage, ledger, stamps, publish. No file an ack counts on is replaced after the
ack, a reader never sees rows of a root that did not ack, and a crash after the ledger
loses nothing (:func:`recover`, before every tracked write).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..chains import Owners, apply_acks
from ..output import Location, OutputRefused
from ..tags import Group
from .columns import CHAIN, TRACKING, Seen, by_chain, local_table, with_tags
from .tracked import Probes, observed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ...interfaces import AckTracker

__all__ = ["STAGING", "Staged", "can_write", "check_write", "stage", "write_ledger", "publish", "recover"]

log = logging.getLogger("xor_ack_dynamodb.spark")

SINK_FORMATS = ("parquet", "csv")
#: The folder of a location that holds staged writes, ledgers and claims.
STAGING = "_xor_ack"


def can_write(spark: SparkSession, location: Location) -> bool:
    """Whether Spark has a file system for ``location`` (``s3://``: on EMR, not from pip)."""
    from .sources import has_filesystem

    return not location.is_s3 or has_filesystem(spark, "s3")


def check_write(
    spark: SparkSession, columns: Sequence[str], location: Location, format: str, tag_column: str
) -> None:
    """Raise :class:`OutputRefused` for a write that cannot be done, before any task: a
    format the sink does not write, a tag column that is a user or tracking column, a
    location that is a file or that Spark has no file system for (``s3://`` from the pip
    package)."""
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
    """A staged write: where, its id, the tag column, the user's columns, the format."""

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


def stage(df: DataFrame, staged: Staged, tags: Sequence[str], probes: Probes) -> Seen:
    """Write ``df`` (a tracked frame built with ``probes``, chain ``i`` tagged
    ``tags[i]``) into the staging folder; return what its side channel saw and the rows
    written."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spark = df.sparkSession
    tag = by_chain(tags)
    if tag is not None:
        tagged = df.withColumn(staged.tag_column, tag)
    else:
        names = local_table(spark, {CHAIN: ("int", range(len(tags))), staged.tag_column: ("string", tags)})
        tagged = df.join(F.broadcast(names), CHAIN, "left")
    sink = Observation()
    rows = tagged.select(*staged.columns, staged.tag_column)
    rows.observe(sink, F.count(F.lit(1)).alias("rows")).write.mode("append").parquet(staged.staging.url)
    written = observed(sink)  # None: not run (an output proven empty); Spark's count instead
    count = written["rows"] if written else rows.count()
    errors, notes, mixed = probes.read(len(tags))
    return Seen(
        errors={tags[c]: e for c, e in errors.items()},
        notes={tags[c]: n for c, n in notes.items()},
        cross=mixed,
        rows=int(count or 0),
    )


@dataclass(frozen=True)
class Sender:
    """How a write's stamps are sent: op ids ``<op_prefix>/<tag>``, the owner and the
    group (one for all chains, or per tag)."""

    op_prefix: str
    owner: Owners
    group: Group | Mapping[str, Group]

    def to_json(self) -> dict[str, Any]:
        group = self.group
        groups = (
            [group.mode, group.size]
            if isinstance(group, Group)
            else {t: [g.mode, g.size] for t, g in group.items()}
        )
        return {"op_prefix": self.op_prefix, "owner": self.owner, "group": groups}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sender:
        raw = data["group"]
        groups = Group(*raw) if isinstance(raw, list) else {t: Group(*g) for t, g in raw.items()}
        return cls(data["op_prefix"], data["owner"], groups)


def write_ledger(
    staged: Staged, tags: Sequence[str], stamps: dict[str, int], seen: Seen, sender: Sender, *, publish: bool
) -> None:
    """The write's ledger, whole, before any stamp (module doc)."""
    ledger = {
        "write": staged.write_id,
        "tag_column": staged.tag_column,
        "columns": list(staged.columns),
        "format": staged.format,
        "tags": list(tags),
        "publish": publish,
        "cross": seen.cross,
        "rows": seen.rows,
        "stamps": {t: f"{v:x}" for t, v in sorted(stamps.items())},
        "errors": dict(sorted(seen.errors.items())),
        "notes": dict(sorted(seen.notes.items())),
        "sender": sender.to_json(),
    }
    staged.meta.put(f"{staged.write_id}.json", json.dumps(ledger, ensure_ascii=False).encode("utf-8"))


def _claims(staged: Staged) -> list[dict[str, Any]]:
    """The publish rounds claimed so far (``<write id>.published``, ``.published.2``...)."""
    meta = staged.meta
    names = [n for n in meta.names(f"{staged.write_id}.published", "") if "/" not in n]
    return [json.loads((meta.get(n) or b"{}").decode("utf-8")) for n in sorted(names, key=len)]


def publish(
    spark: SparkSession,
    staged: Staged,
    acked: Iterable[str],
    *,
    whole: bool = False,
    keep_staging: bool = False,
) -> None:
    """Publish the rows of the ``acked`` chains not published yet, in one claimed round
    (module doc; ``whole``: every root of the write acked). The staged rows are removed
    unless ``keep_staging`` (a later round may publish more)."""
    meta = staged.meta
    claims = _claims(staged)
    done = {t for c in claims for t in c.get("tags", [])}
    chosen = sorted(set(acked) - done)
    if chosen or not claims:
        claim = f"{staged.write_id}.published" + (f".{len(claims) + 1}" if claims else "")
        if whole and not claims and staged.format == "parquet" and not keep_staging:
            source = staged.write_id  # the staged part files themselves
        else:
            source = f"{staged.write_id}.pub-{secrets.token_hex(4)}"
            if chosen:
                rows = with_tags(spark.read.parquet(staged.staging.url), staged.tag_column, chosen)
                writer = rows.select(*staged.columns, staged.tag_column).write.mode("append")
                writer.format(staged.format).options(**({"header": "true"} if staged.format == "csv" else {}))
                writer.save(meta.child(source).url)
        body = json.dumps({"from": source, "tags": chosen}, ensure_ascii=False).encode("utf-8")
        if not meta.claim(claim, body):
            if source != staged.write_id:
                meta.child(source).remove()
            source = json.loads((meta.get(claim) or b"{}").decode("utf-8")).get("from", source)
        _move(meta.child(source), staged.location)
        if source != staged.write_id:
            meta.child(source).remove()
    if not keep_staging:
        staged.staging.remove()


def _move(source: Location, into: Location) -> None:
    names = [n for n in source.names("part-") if not n.endswith(".crc")]
    for name in names:
        source.move(name, into)


def recover(spark: SparkSession, location: Location, tracker: AckTracker) -> int:
    """Publish what earlier writes into ``location`` acked and did not: finish a claimed
    round's moves; send a ledger's stamps a crash left unsent, then publish once its
    chains have all ended (one still pending may be acked by its run any moment); publish
    what was acked since of a write that kept its staged rows. Returns the rounds
    published or finished."""
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
        waiting = {t for t, s in states.items() if s.state == "pending"}
        if waiting and not claims:
            # The ledger's stamps and fails, to its chains still pending, under its op ids:
            # what its run sent changes nothing again, what a crash left unsent is sent.
            stamps = {t: int(v, 16) for t, v in ledger["stamps"].items() if t in waiting}
            errors = {t: r for t, r in ledger["errors"].items() if t in waiting}
            sender = Sender.from_json(ledger["sender"])
            apply_acks(tracker, stamps, errors, sender.group, sender.op_prefix, owner=sender.owner)
            states = tracker.status_many(ledger["tags"])
        pending = any(s.state == "pending" for s in states.values())
        if pending and not claims:
            continue  # chains that wait on others (handed, open stream roots)
        acked = {t for t, s in states.items() if s.state == "acked"}
        whole = acked == set(ledger["tags"])
        if ledger.get("cross") and not whole:
            if not pending:
                log.error(
                    "write %s of %s holds rows of several roots and not all of them acked: "
                    "it is not published (its acked roots' output is missing: replay them)",
                    write_id,
                    location.url,
                )
            continue
        if acked - published or not claims:
            log.warning(
                "publishing write %s of %s: %d chain(s)", write_id, location.url, len(acked - published)
            )
            publish(spark, staged, acked, whole=whole, keep_staging=pending)
            done += 1
        elif not pending:
            staged.staging.remove()
    return done

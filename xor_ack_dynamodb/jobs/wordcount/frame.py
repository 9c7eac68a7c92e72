"""The word count on tracked DataFrames (``xor-ack wordcount``, the default ``--api frame``).

One chain per input file, created by the driver while the job runs. The files are read
in splits by the ``xor_ack_text`` source (every split accounted for; bad bytes replaced
and noted, or failed permanently); words are extracted, lower-cased and counted per file
in the JVM (``explode`` of ``regexp_extract_all(line, '\\p{L}+')``, ``group_by``: no
Python per word); the counts are written by the ``xor_ack_sink`` source, whose commit
records one XOR per file; the driver stamps each file's chain once with it. Two requests
per file, whatever its size.

Rows are written per attempt (``<parts>/attempt-<n>/part-*.parquet``: ``word, count,
xor_ack_tag``); the final count is a Spark aggregation over the rows whose chain ended
acked.

Words: the JVM's ``\\p{L}`` (Unicode letters: Lu, Ll, Lt, Lm, Lo, as Python's
``str.isalpha``) on NFC text, lower-cased by Spark's ``lower`` (Java's
``toLowerCase``), which agree with :func:`~xor_ack_dynamodb.jobs.wordcount.words.tokenize` on the
text we test (English, German, French); both follow the Unicode tables of their runtime
(Java 17: Unicode 13, Python 3.11: Unicode 14), which can differ for letters added since.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ...spark.frame import FrameAttempt, FrameTracking, default_parallelism, register_sources
from ...spark.frame.text_source import SPLIT_BYTES
from ...spark.outcomes import RunReport
from ...spark.output import Location
from .untracked import UntrackedAttempt
from .words import FaultPlan, Options

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from ...config import AckConfig

__all__ = ["frame_job", "run_frame", "frame_counts", "WORD"]

#: Java regex for a word: a maximal run of Unicode letters.
WORD = r"\p{L}+"
TAG_COLUMN = "xor_ack_tag"


def fault_condition(faults: FaultPlan, attempt: int) -> Column:
    """Which word rows raise, in the JVM: a ``faults.rate`` fraction, chosen by
    ``xxhash64`` of the seed, the attempt, the file, the line's byte offset and the
    word's position in the line (deterministic; each attempt draws afresh)."""
    from pyspark.sql import functions as F

    if faults.rate <= 0.0 or attempt > faults.attempts:
        return F.lit(False)
    scale = 1 << 30
    draw = F.pmod(
        F.xxhash64(F.lit(faults.seed), F.lit(attempt), F.col("path"), F.col("offset"), F.col("position")),
        F.lit(scale),
    )
    return draw < F.lit(int(faults.rate * scale))


def frame_job(attempt: FrameAttempt | UntrackedAttempt, options: Options) -> Any:
    """The pipeline on one attempt's files (tracked or not): lines -> words -> counts per
    file, written to ``<parts>/attempt-<n>``."""
    from pyspark.sql import functions as F

    faults = options.faults
    lines = attempt.read_text(
        lambda root: root[1], split_bytes=options.split_bytes or SPLIT_BYTES, bad_bytes=options.bad_bytes
    )
    words = lines.explode(F.regexp_extract_all("line", F.lit(WORD), 0), "word", position="position")
    if faults is not None and faults.rate > 0.0 and attempt.number <= faults.attempts:
        reason = F.concat(
            F.lit("InjectedFailure: word "),
            F.col("position").cast("string"),
            F.lit(" of the line at byte "),
            F.col("offset").cast("string"),
        )
        words = words.fail_when(fault_condition(faults, attempt.number), reason)
    counts = words.with_column("word", F.lower("word")).group_by("word").count()
    return counts.write(options.attempt(attempt.number), tag_column=TAG_COLUMN)


def run_frame(
    spark: SparkSession, roots: Sequence[tuple[int, str]], config: AckConfig | None, options: Options
) -> RunReport | None:
    """Run the job tracked (a report) or, with ``config`` None, untracked (None)."""
    job = partial(frame_job, options=options)
    if config is None:
        register_sources(spark)
        job(UntrackedAttempt(spark, roots, default_parallelism(spark)))
        return None
    tracking = FrameTracking(
        spark,
        config,
        run_id=options.run_id,
        after_flush=options.after_flush,
        tracker=options.tracker,
        transactions=options.transactions,
    )
    return tracking.run(
        list(roots), lambda root: root[1], job, max_attempts=options.max_attempts, observer=options.observer
    )


def _read_s3_parquet(location: Location, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: read the Parquet part objects named in ``name``, on the executors
    (no Hadoop S3 connector needed)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    client = location.client()
    schema = pa.schema([("word", pa.string()), ("count", pa.int64()), (TAG_COLUMN, pa.string())])
    for batch in batches:
        for name in batch.column("name").to_pylist():
            body = location.get(name, client) or b""
            table = pq.read_table(io.BytesIO(body)).select(schema.names).cast(schema)  # tags: plain text
            yield from table.to_batches()


def _parts(spark: SparkSession, options: Options, attempts: Iterable[int]) -> DataFrame | None:
    """The rows these attempts wrote (None: none)."""
    subs = [f"attempt-{n}" for n in sorted(attempts)]
    location = options.parts
    if not location.is_s3:
        dirs = [d.url for d in map(location.child, subs) if os.path.isdir(d.url)]
        return spark.read.parquet(*dirs) if dirs else None
    names = [f"{sub}/{name}" for sub in subs for name in location.child(sub).names("part-")]
    if not names:
        return None
    listed = spark.createDataFrame([(n,) for n in names], "name string")
    schema = f"word string, count bigint, {TAG_COLUMN} string"
    return listed.repartition(min(len(names), 8)).mapInArrow(partial(_read_s3_parquet, location), schema)


def frame_counts(spark: SparkSession, options: Options, report: RunReport | None) -> Counter[str]:
    """Sum, per word, the rows of the chains that ended acked (untracked, ``report``
    None: every row of the one attempt), in Spark; only the distinct words come back
    (as Arrow). An attempt whose chains all ended acked is read whole; an attempt with
    chains that did not is semi-joined with its acked tags first (its failed chains'
    rows were partial); an attempt that acked nothing is not read."""
    from pyspark.sql import functions as F

    by_attempt: dict[int, list[tuple[str, bool]]] = {}
    for outcome in report.outcomes if report is not None else []:
        for number, attempt in enumerate(outcome.attempts, 1):
            by_attempt.setdefault(number, []).append((attempt.tag, attempt.state == "acked"))
    whole = (
        [n for n, chains in by_attempt.items() if all(acked for _, acked in chains)]
        if report is not None
        else [1]
    )
    partial = {
        n: sorted(tag for tag, acked in chains if acked)
        for n, chains in by_attempt.items()
        if n not in whole and any(acked for _, acked in chains)
    }
    frames = [df for df in [_parts(spark, options, whole)] if df is not None]
    partial_df = _parts(spark, options, partial) if partial else None
    if partial_df is not None:
        acked = sorted(t for tags in partial.values() for t in tags)
        tags = spark.createDataFrame([(t,) for t in acked], f"{TAG_COLUMN} string")
        frames.append(partial_df.join(F.broadcast(tags), on=TAG_COLUMN, how="left_semi"))
    if not frames:
        return Counter()
    rows = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    totals = rows.groupBy("word").agg(F.sum("count").alias("count")).toArrow()
    return Counter(
        dict(zip(totals.column("word").to_pylist(), totals.column("count").to_pylist(), strict=True))
    )

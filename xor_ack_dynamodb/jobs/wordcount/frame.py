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
``toLowerCase``), which agree with :func:`~xor_ack_dynamodb.jobs.wordcount.job.tokenize` on the
text we test (English, German, French); both follow the Unicode tables of their runtime
(Java 17: Unicode 13, Python 3.11: Unicode 14), which can differ for letters added since.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ...spark.frame import FrameAttempt, FrameTracking, UntrackedAttempt, default_parallelism, part_store
from ...spark.frame_sink import PartStore
from ...spark.frame_source import CHUNK_BYTES, SPLIT_BYTES
from ...spark.outcomes import Chains, RunObserver, RunReport

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from ...config import AckConfig
    from .job import FaultPlan

__all__ = ["frame_job", "run_frame", "frame_final_counts", "WORD"]

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


def frame_job(
    attempt: FrameAttempt | UntrackedAttempt,
    *,
    output: PartStore,
    parts: str,
    faults: FaultPlan | None = None,
    split_bytes: int = SPLIT_BYTES,
    chunk_bytes: int = CHUNK_BYTES,
    bad_bytes: str = "replace",
) -> Any:
    """The pipeline on one attempt's files (tracked or not): lines -> words -> counts per
    file, written to ``<output>/<parts>/attempt-<n>``."""
    from pyspark.sql import functions as F

    lines = attempt.read_text(
        lambda root: root[1], split_bytes=split_bytes, chunk_bytes=chunk_bytes, bad_bytes=bad_bytes
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
    location = _sub(output, f"{parts}/attempt-{attempt.number}")
    return counts.write(location, tag_column=TAG_COLUMN)


def _sub(store: PartStore, sub: str) -> str:
    return f"{store.location.rstrip('/')}/{sub}"


def run_frame(
    spark: SparkSession,
    roots: Sequence[tuple[int, str]],
    config: AckConfig | None,
    *,
    output: PartStore,
    parts: str,
    run_id: str,
    faults: FaultPlan | None,
    max_attempts: int,
    split_bytes: int,
    bad_bytes: str,
    observer: RunObserver | None,
    after_flush: Callable[[str, int], None] | None = None,
    tracker: Chains | None = None,
    transactions: bool = False,
) -> tuple[RunReport | None, FrameTracking | None]:
    """Run the job tracked (a report and the tracking) or, with ``config`` None,
    untracked (None, None)."""
    job = partial(
        frame_job, output=output, parts=parts, faults=faults, split_bytes=split_bytes, bad_bytes=bad_bytes
    )
    if config is None:
        from ...spark.frame import register_sources

        register_sources(spark)
        job(UntrackedAttempt(spark, roots, default_parallelism(spark)))
        return None, None
    tracking = FrameTracking(
        spark, config, run_id=run_id, after_flush=after_flush, tracker=tracker, transactions=transactions
    )
    report = tracking.run(
        list(roots), lambda root: root[1], job, max_attempts=max_attempts, observer=observer
    )
    return report, tracking


def _read_s3_parquet(store: PartStore, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: read the Parquet part objects named in ``key``, on the executors
    (no Hadoop S3 connector needed)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    client = store._s3()
    bucket = store._bucket_key("")[0]
    schema = pa.schema([("word", pa.string()), ("count", pa.int64()), (TAG_COLUMN, pa.string())])
    for batch in batches:
        for key in batch.column("key").to_pylist():
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            table = pq.read_table(io.BytesIO(body)).select(schema.names).cast(schema)  # tags: plain text
            yield from table.to_batches()


def _parts(spark: SparkSession, store: PartStore, subs: Sequence[str]) -> DataFrame | None:
    if not store.is_s3:
        import os

        dirs = [
            os.path.join(store.location, s) for s in subs if os.path.isdir(os.path.join(store.location, s))
        ]
        return spark.read.parquet(*dirs) if dirs else None
    client = store._s3()
    keys: list[str] = []
    for sub in subs:
        bucket, prefix = store._bucket_key(sub.rstrip("/") + "/part-")
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []))
    if not keys:
        return None
    listed = spark.createDataFrame([(k,) for k in keys], "key string")
    schema = f"word string, count bigint, {TAG_COLUMN} string"
    return listed.repartition(min(len(keys), 8)).mapInArrow(partial(_read_s3_parquet, store), schema)


def frame_final_counts(spark: SparkSession, store: PartStore, parts: str, report: RunReport) -> Counter[str]:
    """Sum, per word, the rows of the chains that ended acked, in Spark; only the
    distinct words come back (as Arrow). An attempt whose chains all ended acked is
    read whole; an attempt with chains that did not is semi-joined with its acked tags
    first (its failed chains' rows were partial); an attempt that acked nothing is not
    read."""
    from pyspark.sql import functions as F

    by_attempt: dict[int, list[tuple[str, bool]]] = {}
    for outcome in report.outcomes:
        for number, attempt in enumerate(outcome.attempts, 1):
            by_attempt.setdefault(number, []).append((attempt.tag, attempt.state == "acked"))
    whole = [n for n, chains in by_attempt.items() if all(acked for _, acked in chains)]
    partial = {
        n: sorted(tag for tag, acked in chains if acked)
        for n, chains in by_attempt.items()
        if n not in whole and any(acked for _, acked in chains)
    }
    frames = []
    whole_df = _parts(spark, store, [f"{parts}/attempt-{n}" for n in sorted(whole)])
    if whole_df is not None:
        frames.append(whole_df)
    if partial:
        partial_df = _parts(spark, store, [f"{parts}/attempt-{n}" for n in sorted(partial)])
        acked = sorted(t for tags in partial.values() for t in tags)
        if partial_df is not None:
            tags = spark.createDataFrame([(t,) for t in acked], f"{TAG_COLUMN} string")
            frames.append(partial_df.join(F.broadcast(tags), on=TAG_COLUMN, how="left_semi"))
    if not frames:
        return Counter()
    rows = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    totals = rows.groupBy("word").agg(F.sum("count").alias("count")).toArrow()
    return Counter(
        dict(zip(totals.column("word").to_pylist(), totals.column("count").to_pylist(), strict=True))
    )


def untracked_final_counts(spark: SparkSession, store: PartStore, parts: str) -> Counter[str]:
    """The untracked job's counts: every row of its one attempt."""
    from pyspark.sql import functions as F

    parts_df = _parts(spark, store, [f"{parts}/attempt-1"])
    if parts_df is None:
        return Counter()
    totals = parts_df.groupBy("word").agg(F.sum("count").alias("count")).toArrow()
    return Counter(
        dict(zip(totals.column("word").to_pylist(), totals.column("count").to_pylist(), strict=True))
    )


def store_for(output: Any) -> PartStore:
    """The :class:`PartStore` of an output location (directory or ``s3://``)."""
    return part_store(output)

"""The word count on tracked DataFrames (``xor-ack wordcount``, the default ``--api frame``).

One chain per input file, created by the driver while the job runs and stamped once
after the write committed: two requests per file, whatever its size; the plan is the
plain job's (lines, words, one aggregation across files) with the file of each line
beside it. Every attempt's rows (``word, count, xor_ack_tag``) stay staged under
``<parts>`` (``publish=False``); a file that fails makes the attempt run its job again
over the other files before any stamp (:mod:`~xor_ack_dynamodb.spark.frame.attempt`),
so each staged write holds the words of acked files only. The final count sums the
staged writes: in the driver, with pyarrow, when it reads the staged Parquet itself
(:mod:`~xor_ack_dynamodb.spark.frame.driver_read`: small, on a directory it sees, a
classic session), otherwise in Spark, where :class:`CountAhead` starts it as soon as
attempt 1's write committed without a failure, so its Spark jobs run while the driver
stamps; it is used only if every chain acked in attempt 1, and made again otherwise.

See docs/wordcount.md and docs/spark.md, "The word count" (how the JVM's words agree
with :func:`~xor_ack_dynamodb.jobs.wordcount.words.tokenize`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from ...spark.frame import FrameAttempt, FrameTracking
from ...spark.frame.columns import with_tags
from ...spark.frame.commit import STAGING, new_write_id
from ...spark.frame.driver_read import codes, driver_files, in_driver
from ...spark.frame.sources import TextRoot, nfc
from ...spark.outcomes import RunReport
from ...spark.output import Location
from .words import FaultPlan, Options

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from ...config import AckConfig

__all__ = ["CountAhead", "frame_job", "run_frame", "frame_counts", "plain_counts", "totals", "NOT_LETTERS"]

#: Java regex that splits words: a run of anything but Unicode letters.
NOT_LETTERS = r"[^\p{L}]+"
TAG_COLUMN = "xor_ack_tag"


def words_of(line: Column) -> Column:
    """The words of ``line``: split at every run of non-letters, empty strings left out."""
    from pyspark.sql import functions as F

    # array_remove, not filter(lambda): a lambda is evaluated by Spark's interpreter, row
    # by row (higher-order functions have no generated code); this cost the word count's
    # main stage about a tenth of its time.
    return F.array_remove(F.split(line, NOT_LETTERS), "")


def fault_condition(faults: FaultPlan, attempt: int) -> Column:
    """Which word rows raise, in the JVM: a ``faults.rate`` fraction, chosen by
    ``xxhash64`` of the seed, the attempt, the file, the line and the word's position in
    the line (deterministic; each attempt draws afresh)."""
    from pyspark.sql import functions as F

    if faults.rate <= 0.0 or attempt > faults.attempts:
        return F.lit(False)
    scale = 1 << 30
    draw = F.pmod(
        F.xxhash64(F.lit(faults.seed), F.lit(attempt), F.col("path"), F.col("line"), F.col("position")),
        F.lit(scale),
    )
    return draw < F.lit(int(faults.rate * scale))


class CountAhead:
    """The final count of attempt 1's staged rows, started in the background as soon as
    its write committed, while the driver stamps the chains and reads what it must: the
    count's Spark jobs overlap the requests instead of following them. It is the final
    count only when every chain of the run acked in attempt 1 (the common case); then
    :func:`frame_counts` takes it, otherwise it counts again over the acked chains'
    rows. Not started when the write already carries a failure (that chain cannot ack),
    nor when the driver reads the staged rows itself: then it counts them after the
    stamps in 0.1 to 0.2 s (710 files), and a Spark job beside the stamps would only
    compete with them for the CPU."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: tuple[str, Future[Counter[str]]] | None = None

    def start(self, spark: SparkSession, staged: str) -> None:
        if driver_files(spark, [Location.of(staged)]) is not None:
            return  # the driver counts it in a fraction of a Spark query's time: see totals()
        # The query is built here, by the calling thread: the thread's one call into the
        # JVM then runs it while the caller stamps (building it there, call by call,
        # competed for the GIL with the stamps and started the job only after them).
        query = _totals_frame(spark, [staged], None)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="wordcount-count-ahead")
        self._ahead = (staged, self._pool.submit(_counted, query))

    def take(self, staged: Sequence[str]) -> Counter[str] | None:
        """The count started ahead, if it was of exactly ``staged`` and succeeded."""
        if self._ahead is None or self._pool is None:
            return None
        url, future = self._ahead
        self._pool.shutdown(wait=False)
        try:
            counts = future.result()
        except Exception:  # the count is made again, and its error, if any, raised there
            return None
        return counts if list(staged) == [url] else None


def frame_job(attempt: FrameAttempt, options: Options, ahead: CountAhead | None = None) -> Any:
    """The pipeline on one attempt's files: lines -> words -> counts per file, staged
    under ``<parts>``; attempt 1 starts ``ahead`` once its write committed clean."""
    from pyspark.sql import functions as F

    faults = options.faults
    failing = faults is not None and faults.rate > 0.0 and attempt.number <= faults.attempts
    lines = attempt.read_text(lambda root: root[1], bad_bytes=options.bad_bytes)
    # The position is drawn on by the fault plan only: without it, the plain job's explode.
    words = lines.explode(words_of(F.col("line")), "word", position="position" if failing else None)
    if faults is not None and failing:
        reason = F.concat(
            F.lit("InjectedFailure: word "), F.col("position").cast("string"), F.lit(" of a line")
        )
        words = words.fail_when(fault_condition(faults, attempt.number), reason)
    counts = words.with_column("word", F.lower("word")).group_by("word").count()
    if ahead is not None and attempt.number == 1:
        write_id = new_write_id(attempt.tracking.tags.owner, attempt.number)
        staged = options.parts.child(f"{STAGING}/{write_id}").url
        attempt.commit.write_id = write_id
        spark = attempt.spark
        attempt.commit.before = lambda seen, stamps: None if seen.errors else ahead.start(spark, staged)
    return counts.write(options.parts, tag_column=TAG_COLUMN, publish=False)


def plain_counts(
    spark: SparkSession, roots: Sequence[tuple[int, str]], faults: FaultPlan | None
) -> Counter[str]:
    """The same count untracked (``--no-tracking``): Spark's reader, the same words, one
    aggregation; a word the fault plan picks raises in the JVM and fails the Spark job,
    as any error would."""
    from pyspark.sql import functions as F

    paths = [TextRoot(i, path).uri or path for i, path in roots]
    lines = spark.read.text(paths).select(
        F.col("_metadata.file_path").alias("path"), nfc("value").alias("line")
    )
    words = lines.select("path", "line", F.posexplode(words_of(F.col("line"))).alias("position", "word"))
    if faults is not None and faults.rate > 0.0:
        failing = F.when(fault_condition(faults, 1), F.raise_error(F.lit("InjectedFailure"))).cast("boolean")
        words = words.where(F.coalesce(failing, F.lit(True)))
    found = words.groupBy(F.lower("word").alias("word")).count().toArrow()
    return Counter(dict(zip(*found.to_pydict().values(), strict=True)))  # columns word, count


def run_frame(
    spark: SparkSession,
    roots: Sequence[tuple[int, str]],
    config: AckConfig,
    options: Options,
    ahead: CountAhead | None = None,
) -> RunReport:
    """Run the job tracked (``ahead``: see :class:`CountAhead`)."""
    tracking = FrameTracking(
        spark, config, run_id=options.run_id, tracker=options.tracker, transactions=options.transactions
    )
    job = partial(frame_job, options=options, ahead=ahead)
    return tracking.run(
        list(roots), lambda root: root[1], job, max_attempts=options.max_attempts, observer=options.observer
    )


def totals(spark: SparkSession, staged: Sequence[str], acked: Sequence[str] | None) -> Counter[str]:
    """Sum, per word, the rows staged under ``staged`` (unless ``acked`` is None, only
    the rows of those chains and the rows of several files, whose writes hold acked
    files only): in the driver when it can read them
    (:mod:`~xor_ack_dynamodb.spark.frame.driver_read`), otherwise in Spark, where only
    the distinct words come back (as Arrow)."""
    import pyarrow as pa

    schema = pa.schema([("word", pa.string()), ("count", pa.int64()), (TAG_COLUMN, pa.string())])
    wanted = None if acked is None else set(acked)
    found = in_driver(spark, [Location.of(url) for url in staged], schema, partial(_summed, acked=wanted))
    return found if found is not None else _counted(_totals_frame(spark, staged, acked))


def _summed(batches: Iterable[pa.RecordBatch], acked: set[str] | None) -> Counter[str]:
    """Per word, the sum of the counts of the rows (of the ``acked`` chains and of
    several files only, unless None), vectorized per batch."""
    import numpy as np
    import pyarrow.compute as pc

    counts: Counter[str] = Counter()
    for batch in batches:
        words, word = codes(batch.column("word"))
        keep = np.ones(len(word), dtype=bool)
        if acked is not None:
            tags, tag = codes(batch.column(TAG_COLUMN))
            keep &= np.array([t is None or t in acked for t in tags], dtype=bool)[tag]
        sums = np.zeros(len(words), dtype=np.int64)
        np.add.at(sums, word[keep], pc.fill_null(batch.column("count"), 0).to_numpy()[keep])
        for i in np.unique(word[keep]).tolist():
            counts[words[i]] += int(sums[i])
    return counts


def _totals_frame(spark: SparkSession, staged: Sequence[str], acked: Sequence[str] | None) -> DataFrame:
    from pyspark.sql import functions as F

    # The staged columns it reads, given: no schema inference (a job of its own).
    schema = f"word string, count bigint, {TAG_COLUMN} string"
    rows = spark.read.schema(schema).parquet(*staged)
    if acked is not None:
        several = rows.where(F.col(TAG_COLUMN).isNull())
        rows = with_tags(rows, TAG_COLUMN, acked).unionByName(several)
    return rows.groupBy("word").agg(F.sum("count").alias("count"))


def _counted(query: DataFrame) -> Counter[str]:
    found = query.toArrow()
    return Counter(dict(zip(*found.to_pydict().values(), strict=True)))  # columns word, count


def frame_counts(
    spark: SparkSession, options: Options, report: RunReport, ahead: CountAhead | None = None
) -> Counter[str]:
    """Sum, per word, the staged rows of the chains that ended acked (:func:`totals`).
    When every chain of every write acked, no chain needs to be picked out, and with one
    write the count ``ahead`` started is it."""
    meta = options.parts.child(STAGING)
    staged = [meta.child(name[: -len(".json")]).url for name in meta.names("", ".json")]
    acked = report.acked_tags()
    if not staged or not acked:
        return Counter()
    tried = {a.tag for o in report.outcomes for a in o.attempts}
    if acked == tried:
        early = ahead.take(staged) if ahead is not None else None
        return early if early is not None else totals(spark, staged, None)
    return totals(spark, staged, sorted(acked))

"""The word count on tracked RDDs (``xor-ack wordcount --api rdd``).

One chain per input file. Each file is read and split into words on the executors
(``fan_out``); each word is counted (``map``, where ``--fail-rate`` injects failures);
counts are summed per word across files through one shuffle (``reduce_by_key``, as the
plain job does); the sums are written durably and the driver then stamps each file's
chain once. Two requests per file on the happy path, whatever its size. When files
failed, the attempt's output (which holds their words) is discarded and the job runs
again, in the same attempt, over the other files only (:meth:`RDDTracking.run`).

Both shuffles (``sum_counts`` and the final count) get as many partitions as the job's
input (:func:`input_slices`: the files spread over twice Spark's default parallelism),
unless ``Options.partitions`` says otherwise: sized to one partition, a reduce stage
runs as one task on one core whatever the cluster (35.7 s of a 25.6M-word run on two).

Rows are written per attempt (``<parts>/attempt-<n>/part-*.csv``: ``word,count``); an
attempt's output holds exactly the words of the files it acked, so the final count sums,
in Spark, the outputs of the attempts that acked a file.
"""

from __future__ import annotations

import csv
import io
import operator
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ...spark.outcomes import PermanentFailure, RunReport
from ...spark.output import Location
from ...spark.rdd import RDDTracking, Stream
from ...spark.rdd.executor import Noted
from ...spark.rdd.writers import csv_writer
from ...spark.tags import escape_key
from .untracked import UntrackedRDD
from .words import FaultPlan, InjectedFailure, Options, tokenize

if TYPE_CHECKING:
    from pyspark import SparkContext

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = ["ReadWords", "CountWord", "rdd_job", "run_rdd", "rdd_counts", "input_slices", "Root"]

#: (file id, path): the path as ``str`` (file names that are not UTF-8 carry lone
#: surrogates, ``os.fsdecode``'s way), and the chain's key.
Root = tuple[int, str]


def decode(data: bytes, bad_bytes: str, label: str) -> tuple[str, str | None]:
    """The text of a file and a note when invalid UTF-8 was replaced (``bad_bytes`` is
    ``replace``); with ``fail``, raise :class:`PermanentFailure` saying where."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        if bad_bytes == "fail":
            raise PermanentFailure(f"bad bytes: invalid UTF-8 at byte {exc.start} of {label}") from None
        text = data.decode("utf-8", "replace")
        count = text.count("\ufffd") - data.count("\ufffd".encode())
        return text, f"bad bytes: {count} invalid UTF-8 sequence(s), first at byte {exc.start}"


@dataclass(frozen=True)
class ReadWords:
    """A file's words as ``(file id, position, word)`` (see :func:`~.words.tokenize`),
    with a note when bad bytes were replaced. ``s3://`` objects are read with boto3
    (``s3``: the endpoint and region the driver found)."""

    bad_bytes: str = "replace"
    s3: Location | None = None

    def __call__(self, root: Root) -> Noted | list[tuple[int, int, str]]:
        file_id, path = root
        if path.startswith("s3://"):
            folder, _, name = path.rpartition("/")
            data = (self.s3 or Location.s3_environment()).at(folder).get(name)
            if data is None:
                raise FileNotFoundError(f"no such object: {path}")
        else:
            with open(path, "rb") as handle:
                data = handle.read()
        text, note = decode(data, self.bad_bytes, escape_key(path))
        words = [(file_id, position, word) for position, word in enumerate(tokenize(text))]
        return Noted(words, note) if note else words


@dataclass(frozen=True)
class CountWord:
    """``(file id, position, word) -> (word, 1)``, raising where the fault plan says
    so."""

    faults: FaultPlan | None
    attempt: int

    def __call__(self, record: tuple[int, int, str]) -> tuple[str, int]:
        file_id, position, word = record
        if self.faults is not None and self.faults.fails(self.attempt, file_id, position):
            raise InjectedFailure(f"injected failure at word {position} of file {file_id}")
        return word, 1


def input_slices(sc: SparkContext, items: int) -> int:
    """The partitions of ``items`` inputs (files, part files): twice Spark's default
    parallelism (two tasks per core, so that one long file does not leave a core idle),
    at most one per input, at least one."""
    return max(1, min(items, sc.defaultParallelism * 2))


def rdd_job(stream: Stream, attempt: int, options: Options) -> int:
    """The pipeline, on started file records (tracked or not). Writes
    ``<parts>/attempt-<n>/part-*.csv`` (``word,count``); returns the rows written.
    The reduce has ``options.partitions`` partitions, or (None) as many as the input
    (Spark's default partitioner; ``spark.default.parallelism`` when that is set)."""
    writer = csv_writer(options.attempt(attempt), ("word", "count"), tuple)
    return (
        stream.fan_out(ReadWords(options.bad_bytes, Location.s3_environment()), "read_words")
        .map(CountWord(options.faults, attempt), "count_word")
        .reduce_by_key(operator.add, options.partitions, "sum_counts")
        .sink(writer, "write_counts")
    )


def run_rdd(
    sc: SparkContext,
    roots: Sequence[Root],
    config: AckConfig | None,
    options: Options,
    tracker: AckTracker | None = None,
) -> RunReport | None:
    """Run the job tracked (a report) or, with ``config`` None, untracked (None);
    ``tracker``: the driver's (default: the one ``config`` describes)."""
    job = partial(rdd_job, options=options)
    slices = input_slices(sc, len(roots))
    if config is None:
        job(UntrackedRDD(sc.parallelize(list(roots), slices)), 1)
        return None
    tracking = RDDTracking(
        sc,
        config,
        run_id=options.run_id,
        after_flush=options.after_flush,
        transactions=options.transactions,
        tracker=tracker,
    )
    return tracking.run(
        list(roots),
        operator.itemgetter(1),
        job,
        max_attempts=options.max_attempts,
        num_slices=slices,
        observer=options.observer,
    )


def _rows(location: Location, name: str) -> Iterator[tuple[str, int]]:
    """The ``(word, count)`` rows of one part file (on an executor)."""
    text = (location.get(name) or b"").decode("utf-8")
    for row in csv.DictReader(io.StringIO(text, newline="")):
        yield row["word"], int(row["count"])


def rdd_counts(sc: SparkContext, options: Options, acked: dict[int, set[int]]) -> Counter[str]:
    """Sum, per word, the rows of every attempt that acked a file (``acked``: attempt ->
    file ids; an attempt's output holds the words of exactly the files it acked), in
    Spark: the part files are listed here and read and summed on the executors; only
    the distinct words come back."""
    names = [
        f"attempt-{a}/{name}"
        for a in sorted(a for a, files in acked.items() if files)
        for name in options.attempt(a).names("part-", ".csv")
    ]
    if not names:
        return Counter()
    rows = sc.parallelize(names, input_slices(sc, len(names))).flatMap(partial(_rows, options.parts))
    return Counter(dict(rows.reduceByKey(operator.add, options.partitions).collect()))

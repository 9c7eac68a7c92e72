"""The main job: a tracked word count (database -> files -> words) on Spark.

One chain per input file, which reaches zero exactly when every one of the file's words
is in the committed output. The two pipelines are :mod:`.frame` (DataFrames, the
default) and :mod:`.rdd`; this module runs either and writes the results. Nothing in the
library imports the job. ``counts.csv`` counts, for each file, only the rows of the one
attempt whose chain ended acked: a file is counted once however many attempts it took.
Bad bytes are replaced by U+FFFD and noted, or (``bad_bytes="fail"``) fail the file
without replay; other files are untouched either way. A folder is read as Spark's text
reader reads it, and what that skips is reported (:mod:`.inputs`).

See docs/wordcount.md and docs/spark.md, "The word count" and "Output stays exact under
replay".
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ...spark.attempts import new_run_id
from ...spark.frame import is_connect
from ...spark.frame.commit import can_write
from ...spark.outcomes import RunObserver, RunReport
from ...spark.output import Location
from ...spark.rdd.executor import AfterFlush
from ...spark.tags import escape_key
from .frame import CountAhead, frame_counts, plain_counts, run_frame
from .inputs import Inputs, expand_folders, find_inputs, select_inputs
from .rdd import rdd_counts, run_rdd
from .words import FaultPlan, InjectedFailure, Options, default_corpus, tokenize

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = [
    "tokenize",
    "find_inputs",
    "select_inputs",
    "Inputs",
    "default_corpus",
    "FaultPlan",
    "InjectedFailure",
    "run_wordcount",
    "write_outputs",
    "WordCountReport",
    "FileResult",
    "APIS",
]

APIS = ("frame", "rdd")


# -- the driver -----------------------------------------------------------------------


@dataclass
class FileResult:
    """One input file: its final chain and every attempt's (tag, state, reason). ``path``
    is the file name as text (escaped where it is not UTF-8); ``note`` says what was
    noticed without failing it (bad bytes replaced)."""

    path: str
    tag: str
    state: str
    attempts: int
    error: str | None
    history: list[dict[str, Any]] = field(default_factory=list)
    acked_attempt: int | None = None
    note: str | None = None


@dataclass
class WordCountReport:
    """What a run produced; :meth:`totals` and :meth:`to_json` give ``report.json``.
    ``skipped``: what the input folders held that the run left out (:mod:`.inputs`)."""

    run_id: str
    tracking: bool
    files: list[FileResult]
    counts: Counter[str]
    requests: Counter[str]
    wall_seconds: float
    job_errors: list[str]
    api: str = "frame"
    phases: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    @property
    def all_acked(self) -> bool:
        return all(f.state in ("acked", "untracked") for f in self.files)

    def totals(self) -> dict[str, Any]:
        words = sum(self.counts.values())
        requests = self.requests.get("requests", 0)
        return {
            "files": len(self.files),
            "skipped": len(self.skipped),
            "words": words,
            "distinct_words": len(self.counts),
            "acked": sum(f.state == "acked" for f in self.files),
            "failed": sum(f.state not in ("acked", "untracked") for f in self.files),
            "replays": sum(f.attempts - 1 for f in self.files),
            "noted": sum(f.note is not None for f in self.files),
            "dynamodb_requests": requests,
            "requests_per_word": round(requests / words, 6) if words else None,
            "wall_seconds": round(self.wall_seconds, 3),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "api": self.api,
            "tracking": self.tracking,
            "files": [
                {k: v for k, v in dataclasses.asdict(f).items() if k != "acked_attempt"} for f in self.files
            ],
            "skipped": self.skipped,
            "totals": self.totals(),
            "phases": {k: round(v, 3) for k, v in self.phases.items()},
            "requests": dict(sorted(self.requests.items())),
            "job_errors": self.job_errors,
        }


def _file_results(report: RunReport, roots: Sequence[tuple[int, str]]) -> list[FileResult]:
    files = []
    for outcome, (_, path) in zip(report.outcomes, roots, strict=True):
        attempts = outcome.attempts
        last = attempts[-1]
        acked_at = next((n for n, a in enumerate(attempts, 1) if a.state == "acked"), None)
        error = next((a.reason for a in reversed(attempts) if a.reason), None)
        files.append(
            FileResult(
                path=escape_key(path),
                tag=last.tag,
                state=last.state,
                attempts=len(attempts),
                error=error if last.state != "acked" or len(attempts) > 1 else None,
                history=[{"tag": a.tag, "state": a.state, "reason": a.reason} for a in attempts],
                acked_attempt=acked_at,
                note=last.note if last.state == "acked" else next((a.note for a in attempts if a.note), None),
            )
        )
    return files


def run_wordcount(
    spark: SparkSession | SparkContext,
    inputs: Sequence[str | Path] | Inputs,
    output: str | Path,
    config: AckConfig | None,
    *,
    api: str | None = None,
    fail_rate: float = 0.0,
    seed: int = 0,
    fail_attempts: int = 1,
    max_attempts: int = 3,
    partitions: int | None = None,
    run_id: str | None = None,
    after_flush: AfterFlush | None = None,
    observer: RunObserver | None = None,
    keep_parts: bool = False,
    bad_bytes: str = "replace",
    split_bytes: int | None = None,
    tracker: AckTracker | None = None,
    transactions: bool = False,
    started_at: float | None = None,
) -> WordCountReport:
    """Count the words of ``inputs`` and write ``counts.csv`` and ``report.json`` to
    ``output``, a directory (local, or shared by the cluster's nodes) or an
    ``s3://bucket/prefix`` (see :meth:`~xor_ack_dynamodb.spark.output.Location.of`).
    With ``config`` None the job runs without tracking (no DynamoDB; a record that
    raises then fails the Spark job, as it would in any job).

    ``inputs``: files, each tracked as given (one missing fails its chain), and folders,
    each read as Spark's text reader reads it (``spark.read.text(folder)``, and below it
    ``recursiveFileLookup``: :func:`~.inputs.expand_folders`); or what
    :func:`~.inputs.select_inputs` chose. What the folders held that Spark's reader
    skips is left out and reported (``skipped``). The outputs get the mode the
    process's umask gives a new file, and a run leaves nothing else under ``output``
    (unless ``keep_parts``).

    ``spark`` is a SparkSession (classic or Spark Connect) or a SparkContext; ``api`` is
    ``"frame"`` (default with a session) or ``"rdd"`` (default with a SparkContext; not
    under Spark Connect). ``partitions``: the RDD job's reduce partitions (default: as many as
    its input's, see :func:`.rdd.input_slices`), or the DataFrame job's shuffle partitions
    (default: Spark's, coalesced by adaptive execution). ``split_bytes``: the size of
    Spark's file splits on the DataFrame path (``spark.sql.files.maxPartitionBytes``,
    default 128 MiB); ``after_flush``: a test hook of the RDD path
    (:class:`~xor_ack_dynamodb.spark.DieOnFirstAttempt`), after each step's flush.
    ``tracker``: the driver's tracker (default: the one ``config`` describes; on both paths
    only the driver talks to it, so a ``MemoryAck`` measures Spark's own cost).
    ``transactions``: the driver's creates and stamps as TransactWriteItems of
    up to 100 (see :class:`~xor_ack_dynamodb.spark.frame.FrameTracking`).
    ``started_at``: the ``time.time()`` the report's ``wall_seconds`` counts from
    (``xor-ack`` passes its process's start, so the figure includes the interpreter,
    the imports, the JVM's start and the backend's; the phase ``startup`` is that
    part); default this call. ``wall_seconds`` ends as the outputs are about to be
    written (the report holds it).
    """
    from pyspark import SparkContext

    called = time.time()
    started_at = called if started_at is None else min(started_at, called)
    api = api or ("rdd" if isinstance(spark, SparkContext) else "frame")
    if api not in APIS:
        raise InvalidConfig(f"api must be one of {APIS}, got {api!r}")
    if bad_bytes not in ("replace", "fail"):
        raise InvalidConfig(f"bad_bytes must be 'replace' or 'fail', got {bad_bytes!r}")
    run_id = run_id or new_run_id()
    faults = FaultPlan(fail_rate, seed, fail_attempts) if fail_rate else None
    chosen = inputs if isinstance(inputs, Inputs) else expand_folders(inputs)
    roots = [(i, os.fsdecode(path)) for i, path in enumerate(chosen.files)]
    options = Options(
        Location.of(output),
        run_id,
        faults,
        max_attempts,
        partitions,
        bad_bytes,
        split_bytes,
        after_flush,
        observer,
        tracker,
        transactions,
    )
    phases: dict[str, float] = {"startup": called - started_at} if called > started_at else {}
    clock = time.perf_counter()
    if api == "frame" and after_flush is not None:
        raise InvalidConfig(
            "after_flush is a hook of the RDD path (the DataFrame path runs no Python per row)"
        )
    if api == "rdd":
        if is_connect(spark):
            raise InvalidConfig(
                "the RDD job cannot run under Spark Connect (it has no RDDs): use api='frame'"
            )
        sc = spark if isinstance(spark, SparkContext) else spark.sparkContext
        report = run_rdd(sc, roots, config, options, tracker)
        phases["job"] = time.perf_counter() - clock
        clock = time.perf_counter()
        counts = rdd_counts(sc, options, _acked_attempts(report, roots))
    else:
        from pyspark.sql import SparkSession

        session = spark if not isinstance(spark, SparkContext) else SparkSession.builder.getOrCreate()
        settings = {
            "spark.sql.shuffle.partitions": partitions,
            "spark.sql.files.maxPartitionBytes": split_bytes,
        }
        previous = {k: session.conf.get(k, None) for k, v in settings.items() if v}
        for name in previous:
            session.conf.set(name, str(settings[name]))
        if options.output.is_s3 and not can_write(session, options.output):
            temp = tempfile.mkdtemp(prefix="xor-ack-parts-")
            options = dataclasses.replace(options, parts_root=Location(temp))
        try:
            if config is None:
                report, counts = None, plain_counts(session, roots, faults)
                phases["job"] = time.perf_counter() - clock
            else:
                ahead = CountAhead()
                report = run_frame(session, roots, config, options, ahead)
                phases["job"] = time.perf_counter() - clock
                clock = time.perf_counter()
                counts = frame_counts(session, options, report, ahead)
        finally:
            for name, old in previous.items():
                if old is not None:
                    session.conf.set(name, old)
            if options.parts_root is not None and not keep_parts:
                options.parts_root.remove()
    phases["final_count"] = time.perf_counter() - clock
    if report is None:
        files = [FileResult(escape_key(p), "", "untracked", 1, None, acked_attempt=1) for _, p in roots]
        requests, errors = Counter({"requests": 0}), []
    else:
        files, requests, errors = _file_results(report, roots), report.counters, report.job_errors
    wall = time.time() - started_at
    result = WordCountReport(
        run_id, config is not None, files, counts, requests, wall, errors, api, phases, list(chosen.skipped)
    )
    write_outputs(result, options.output)
    if not keep_parts:
        options.parts.remove()
        if options.parts_root is None and not options.output.is_s3:
            with contextlib.suppress(OSError):  # not empty (another run's parts) or gone
                os.rmdir(options.output.child(".parts").url)
    return result


def _acked_attempts(report: RunReport | None, roots: Sequence[tuple[int, str]]) -> dict[int, set[int]]:
    """Attempt -> the files (ids) it acked (untracked: attempt 1, every file)."""
    if report is None:
        return {1: {i for i, _ in roots}}
    acked: dict[int, set[int]] = {}
    for (file_id, _), outcome in zip(roots, report.outcomes, strict=True):
        for number, attempt in enumerate(outcome.attempts, 1):
            if attempt.state == "acked":
                acked.setdefault(number, set()).add(file_id)
    return acked


def write_outputs(report: WordCountReport, output: str | Path | Location) -> None:
    """``counts.csv`` (``word,count``, by descending count then word) and
    ``report.json``, each written whole (a temporary file renamed into place, or one S3
    put); on a file system with the mode a new file gets under the process's umask
    (``0o644`` under ``022``)."""
    import csv
    import io

    location = Location.of(output)
    rows = sorted(report.counts.items(), key=lambda item: (-item[1], item[0]))
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(("word", "count"))
    writer.writerows(rows)
    location.put("counts.csv", buffer.getvalue().encode("utf-8"))
    report_json = json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"
    location.put("report.json", report_json.encode("utf-8"))

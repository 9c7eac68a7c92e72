"""The main job: a tracked word count (database -> files -> words) on Spark.

One chain per input file. Each file is read and split into words on the executors
(``fan_out``: acks the file, starts one edge per word); each word is counted
(``map``, where ``--fail-rate`` injects failures); counts are summed per (file, word)
through a shuffle (``reduce_by_key``, carrying the words' pending edges); the sums are
written durably and only then acked (``sink``). A file's chain reaches zero exactly when
every one of its words is in a written partition.

Words: the text is put in Unicode normalization form NFC (so "é" written as "e" plus a
combining accent counts as one letter), then split into maximal runs of letters, where a
letter is a character for which ``str.isalpha()`` is true (Unicode categories Lu, Ll,
Lt, Lm, Lo); each run is lower-cased with ``str.lower()``. Everything else splits words:
digits, punctuation, apostrophes and hyphens, so "don't" is "don" and "t", "co-op" is
"co" and "op", "mp3" is "mp".

Exactness under replay: rows are written per (file, word) under the attempt that
produced them, and ``counts.csv`` is a Spark aggregation over, for each file, only the
rows of the one attempt whose chain ended acked. Rows of failed attempts (partial by
nature) are never counted, and a file is counted once however many attempts it took.

Bad bytes (invalid UTF-8): with ``bad_bytes="replace"`` (default) they are decoded as
U+FFFD (not a letter, so it splits words), the file is counted and acked, and its report
entry carries a note; with ``"fail"`` the file fails with the reason and is not replayed
(a replay would read the same bytes). Other files are not touched either way. File names
that are not UTF-8 are read as the bytes they are, and tracked under an escaped key
(see :func:`~xor_ack_dynamodb.spark.tags.escape_key`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ...spark.driver import new_run_id
from ...spark.executor import AfterFlush
from ...spark.outcomes import Chains, RunObserver, RunReport
from ...spark.sink import LocalOutput, S3Output, output_location
from ...spark.tags import escape_key

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from ...config import AckConfig

__all__ = [
    "tokenize",
    "find_inputs",
    "default_corpus",
    "FaultPlan",
    "InjectedFailure",
    "run_wordcount",
    "WordCountReport",
    "FileResult",
    "APIS",
]

APIS = ("frame", "rdd")

#: A fast first cut: runs of word characters that are not digits or "_" (a superset of
#: letters: it also admits numerals like "²"; tokenize() splits those out).
_CANDIDATE = re.compile(r"[^\W\d_]+")

#: Where the bundled sample corpus lives in a source checkout.
_CORPUS = Path(__file__).resolve().parents[3] / "examples" / "data"


def tokenize(text: str) -> list[str]:
    """The words of ``text``, in order (see the module doc for the rule)."""
    words: list[str] = []
    for run in _CANDIDATE.findall(unicodedata.normalize("NFC", text)):
        if run.isalpha():
            words.append(run.lower())
        else:
            words.extend(w.lower() for w in "".join(c if c.isalpha() else " " for c in run).split())
    return words


def default_corpus() -> Path:
    """The bundled corpus, ``examples/data`` of the source checkout."""
    if not _CORPUS.is_dir():
        raise FileNotFoundError(f"the bundled corpus {_CORPUS} is missing: pass INPUT files or directories")
    return _CORPUS


def find_inputs(paths: Sequence[str | Path]) -> list[Path]:
    """The input files: each path as given, directories expanded to the files under them
    (hidden ones skipped), sorted and without repeats.

    Raises ``FileNotFoundError`` for a path that does not exist and
    :class:`InvalidConfig` when no file is found.
    """
    found: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and not any(
                    part.startswith(".") for part in child.relative_to(path).parts
                ):
                    found[child.resolve()] = None
        elif path.is_file():
            found[path.resolve()] = None
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")
    if not found:
        raise InvalidConfig("no input files found")
    return list(found)


class InjectedFailure(RuntimeError):
    """A failure ``--fail-rate`` injected into a word's processing."""


@dataclass(frozen=True)
class FaultPlan:
    """Which word records raise: a ``rate`` fraction of them in each of the first
    ``attempts`` attempts (transient faults: replays after that run clean), chosen by
    hashing the seed, the attempt, the file and the word's position, so a run is
    reproducible and each attempt draws afresh."""

    rate: float
    seed: int = 0
    attempts: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate < 1.0:
            raise InvalidConfig(f"the fail rate must be in [0, 1), got {self.rate}")

    def fails(self, attempt: int, file_id: int, position: int) -> bool:
        if self.rate <= 0.0 or attempt > self.attempts:
            return False
        digest = hashlib.blake2b(
            f"{self.seed}/{attempt}/{file_id}/{position}".encode(), digest_size=8
        ).digest()
        return int.from_bytes(digest, "big") < self.rate * 2**64


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
    """What a run produced; :meth:`totals` and :meth:`to_json` give ``report.json``."""

    run_id: str
    tracking: bool
    files: list[FileResult]
    counts: Counter[str]
    requests: Counter[str]
    wall_seconds: float
    job_errors: list[str]
    api: str = "frame"
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def all_acked(self) -> bool:
        return all(f.state in ("acked", "untracked") for f in self.files)

    def totals(self) -> dict[str, Any]:
        words = sum(self.counts.values())
        requests = self.requests.get("requests", 0)
        return {
            "files": len(self.files),
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
                {
                    "path": f.path,
                    "tag": f.tag,
                    "state": f.state,
                    "attempts": f.attempts,
                    "error": f.error,
                    "note": f.note,
                    "history": f.history,
                }
                for f in self.files
            ],
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
    inputs: Sequence[str | Path],
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
    tracker: Chains | None = None,
    transactions: bool = False,
) -> WordCountReport:
    """Count the words of ``inputs`` and write ``counts.csv`` and ``report.json`` to
    ``output``, a directory (local, or shared by the cluster's nodes) or an
    ``s3://bucket/prefix`` (see :func:`~xor_ack_dynamodb.spark.sink.output_location`).
    With ``config`` None the job runs without tracking (no DynamoDB; a record that
    raises then fails the Spark job, as it would in any job).

    ``spark`` is a SparkSession (classic or Spark Connect) or a SparkContext; ``api`` is
    ``"frame"`` (default with a session) or ``"rdd"`` (default with a SparkContext; not
    under Spark Connect). ``partitions``: the RDD job's reduce partitions (default half
    Spark's default parallelism, 1 to 8), or the DataFrame job's shuffle partitions
    (default: Spark's, coalesced by adaptive execution). ``split_bytes``: the DataFrame
    reader's split size (default 32 MiB); ``after_flush``: a test hook
    (:class:`~xor_ack_dynamodb.spark.DieOnFirstAttempt`): after each RDD step's flush, or
    after each DataFrame read task (``"read"``) and durable sink task (``"write"``).
    ``tracker``: the DataFrame driver's tracker (default ``XorAckDynamoDB.from_config(config)``; only the
    driver talks to it on that path, so a ``MemoryAck`` measures Spark's own cost).
    ``transactions``: the DataFrame driver's creates and stamps as TransactWriteItems of
    up to 100 (see :class:`~xor_ack_dynamodb.spark.frame.FrameTracking`).
    """
    from pyspark import SparkContext

    from ...spark.frame import is_connect

    started = time.perf_counter()
    api = api or ("rdd" if isinstance(spark, SparkContext) else "frame")
    if api not in APIS:
        raise InvalidConfig(f"api must be one of {APIS}, got {api!r}")
    if bad_bytes not in ("replace", "fail"):
        raise InvalidConfig(f"bad_bytes must be 'replace' or 'fail', got {bad_bytes!r}")
    run_id = run_id or new_run_id()
    faults = FaultPlan(fail_rate, seed, fail_attempts) if fail_rate else None
    roots = [(i, os.fsdecode(path)) for i, path in enumerate(inputs)]
    parts = f".parts/{run_id}"
    phases: dict[str, float] = {}
    if api == "rdd":
        if tracker is not None or transactions:
            raise InvalidConfig("no tracker= or transactions= with api='rdd': its executors reach the table")
        if is_connect(spark):
            raise InvalidConfig(
                "the RDD job cannot run under Spark Connect (it has no RDDs): use api='frame'"
            )
        sc = spark if isinstance(spark, SparkContext) else spark.sparkContext
        result = _run_rdd(
            sc,
            roots,
            output,
            config,
            run_id,
            parts,
            faults,
            max_attempts,
            partitions,
            bad_bytes,
            after_flush,
            observer,
            phases,
        )
    else:
        from pyspark.sql import SparkSession

        session = spark if not isinstance(spark, SparkContext) else SparkSession.builder.getOrCreate()
        result = _run_frame(
            session,
            roots,
            output,
            config,
            run_id,
            parts,
            faults,
            max_attempts,
            partitions,
            bad_bytes,
            split_bytes,
            observer,
            after_flush,
            tracker,
            phases,
            transactions,
        )
    files, counts, requests, errors, location = result
    wall = time.perf_counter() - started
    report = WordCountReport(run_id, config is not None, files, counts, requests, wall, errors, api, phases)
    write_outputs(report, location)
    if not keep_parts:
        location.remove(parts)
    return report


_Result = tuple[list[FileResult], Counter[str], Counter[str], list[str], "LocalOutput | S3Output"]


def _untracked_files(roots: Sequence[tuple[int, str]]) -> list[FileResult]:
    return [FileResult(escape_key(p), "", "untracked", 1, None, acked_attempt=1) for _, p in roots]


def _run_rdd(
    sc: SparkContext,
    roots: list[tuple[int, str]],
    output: str | Path,
    config: AckConfig | None,
    run_id: str,
    parts: str,
    faults: FaultPlan | None,
    max_attempts: int,
    partitions: int | None,
    bad_bytes: str,
    after_flush: AfterFlush | None,
    observer: RunObserver | None,
    phases: dict[str, float],
) -> _Result:
    from .rdd import rdd_final_counts, run_rdd

    location = output_location(output)
    clock = time.perf_counter()
    report = run_rdd(
        sc,
        roots,
        config,
        output=location,
        parts=parts,
        run_id=run_id,
        faults=faults,
        max_attempts=max_attempts,
        partitions=partitions or max(1, min(8, sc.defaultParallelism // 2)),
        bad_bytes=bad_bytes,
        after_flush=after_flush,
        observer=observer,
    )
    phases["job"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if report is None:
        files = _untracked_files(roots)
        acked = {1: {i for i, _ in roots}}
        requests: Counter[str] = Counter({"requests": 0})
        errors: list[str] = []
    else:
        files = _file_results(report, roots)
        acked = {}
        for file_id, f in enumerate(files):
            if f.acked_attempt is not None:
                acked.setdefault(f.acked_attempt, set()).add(file_id)
        requests, errors = report.counters, report.job_errors
    counts = rdd_final_counts(sc, location, parts, acked)
    phases["final_count"] = time.perf_counter() - clock
    return files, counts, requests, errors, location


def _run_frame(
    spark: SparkSession,
    roots: list[tuple[int, str]],
    output: str | Path,
    config: AckConfig | None,
    run_id: str,
    parts: str,
    faults: FaultPlan | None,
    max_attempts: int,
    partitions: int | None,
    bad_bytes: str,
    split_bytes: int | None,
    observer: RunObserver | None,
    after_flush: AfterFlush | None,
    tracker: Chains | None,
    phases: dict[str, float],
    transactions: bool = False,
) -> _Result:
    from ...spark.frame_source import SPLIT_BYTES
    from .frame import frame_final_counts, run_frame, store_for, untracked_final_counts

    store = store_for(output)
    location = output_location(store.location)
    previous = spark.conf.get("spark.sql.shuffle.partitions", None) if partitions else None
    if partitions:
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        clock = time.perf_counter()
        report, tracking = run_frame(
            spark,
            roots,
            config,
            output=store,
            parts=parts,
            run_id=run_id,
            faults=faults,
            max_attempts=max_attempts,
            split_bytes=split_bytes or SPLIT_BYTES,
            bad_bytes=bad_bytes,
            observer=observer,
            after_flush=after_flush,
            tracker=tracker,
            transactions=transactions,
        )
        phases["job"] = time.perf_counter() - clock
        clock = time.perf_counter()
        if report is None:
            files = _untracked_files(roots)
            counts = untracked_final_counts(spark, store, parts)
            requests: Counter[str] = Counter({"requests": 0})
            errors: list[str] = []
        else:
            files = _file_results(report, roots)
            counts = frame_final_counts(spark, store, parts, report)
            requests, errors = report.counters, report.job_errors
        phases["final_count"] = time.perf_counter() - clock
    finally:
        if partitions and previous is not None:
            spark.conf.set("spark.sql.shuffle.partitions", previous)
    return files, counts, requests, errors, location


def write_outputs(report: WordCountReport, output: str | Path | LocalOutput | S3Output) -> None:
    """``counts.csv`` (``word,count``, by descending count then word) and
    ``report.json``, each written whole (a temporary file renamed into place, or one S3
    put)."""
    import csv
    import io

    location = output if isinstance(output, (LocalOutput, S3Output)) else output_location(output)
    rows = sorted(report.counts.items(), key=lambda item: (-item[1], item[0]))
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(("word", "count"))
    writer.writerows(rows)
    location.put("counts.csv", buffer.getvalue().encode("utf-8"))
    report_json = json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"
    location.put("report.json", report_json.encode("utf-8"))

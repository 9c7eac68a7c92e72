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
produced them, and ``counts.csv`` sums, for each file, only the rows of the one attempt
whose chain ended acked. Rows of failed attempts (partial by nature) are never counted,
and a file is counted once however many attempts it took.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InvalidConfig
from .spark.driver import RunObserver, Tracking, new_run_id
from .spark.executor import AfterFlush
from .spark.sink import LocalOutput, S3Output, output_location
from .spark.tracked import Stream, UntrackedRDD

if TYPE_CHECKING:
    from pyspark import SparkContext

    from .config import AckConfig

__all__ = [
    "tokenize",
    "find_inputs",
    "default_corpus",
    "FaultPlan",
    "InjectedFailure",
    "wordcount_job",
    "run_wordcount",
    "WordCountReport",
    "FileResult",
]

#: A fast first cut: runs of word characters that are not digits or "_" (a superset of
#: letters: it also admits numerals like "²"; tokenize() splits those out).
_CANDIDATE = re.compile(r"[^\W\d_]+")

#: Where the bundled sample corpus lives in a source checkout.
_CORPUS = Path(__file__).resolve().parent.parent / "examples" / "data"


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


# -- the job's functions (module level, so executors import them by name) ------------

Root = tuple[int, str, str]  # (file id, chain key, path)


def read_words(root: Root) -> Iterator[tuple[int, int, str]]:
    """A file's words as ``(file id, position, word)``; the file is read as UTF-8."""
    file_id, _key, path = root
    text = Path(path).read_text(encoding="utf-8")
    for position, word in enumerate(tokenize(text)):
        yield file_id, position, word


@dataclass(frozen=True)
class CountWord:
    """``(file id, position, word) -> ((file id, word), 1)``, raising where the fault
    plan says so."""

    faults: FaultPlan | None
    attempt: int

    def __call__(self, record: tuple[int, int, str]) -> tuple[tuple[int, str], int]:
        file_id, position, word = record
        if self.faults is not None and self.faults.fails(self.attempt, file_id, position):
            raise InjectedFailure(f"injected failure at word {position} of file {file_id}")
        return (file_id, word), 1


def _row(record: tuple[tuple[int, str], int]) -> tuple[int, str, int]:
    (file_id, word), count = record
    return file_id, word, count


def wordcount_job(
    stream: Stream,
    attempt: int,
    *,
    output: LocalOutput | S3Output,
    parts: str,
    faults: FaultPlan | None = None,
    partitions: int | None = None,
) -> int:
    """The pipeline, on started file records (tracked or not). Writes
    ``<output>/<parts>/attempt-<n>/part-*.csv`` (``file,word,count``); returns the rows
    written."""
    writer = output.writer(f"{parts}/attempt-{attempt}", ("file", "word", "count"), _row)
    return (
        stream.fan_out(read_words, "read_words")
        .map(CountWord(faults, attempt), "count_word")
        .reduce_by_key(operator.add, partitions, "sum_counts")
        .sink(writer, "write_counts")
    )


# -- the driver -----------------------------------------------------------------------


@dataclass
class FileResult:
    """One input file: its final chain and every attempt's (tag, state, reason)."""

    path: str
    tag: str
    state: str
    attempts: int
    error: str | None
    history: list[dict[str, Any]] = field(default_factory=list)
    acked_attempt: int | None = None


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
            "dynamodb_requests": requests,
            "requests_per_word": round(requests / words, 6) if words else None,
            "wall_seconds": round(self.wall_seconds, 3),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "tracking": self.tracking,
            "files": [
                {
                    "path": f.path,
                    "tag": f.tag,
                    "state": f.state,
                    "attempts": f.attempts,
                    "error": f.error,
                    "history": f.history,
                }
                for f in self.files
            ],
            "totals": self.totals(),
            "requests": dict(sorted(self.requests.items())),
            "job_errors": self.job_errors,
        }


def run_wordcount(
    sc: SparkContext,
    inputs: Sequence[Path],
    output: str | Path,
    config: AckConfig | None,
    *,
    fail_rate: float = 0.0,
    seed: int = 0,
    fail_attempts: int = 1,
    max_attempts: int = 3,
    partitions: int | None = None,
    run_id: str | None = None,
    after_flush: AfterFlush | None = None,
    observer: RunObserver | None = None,
    keep_parts: bool = False,
) -> WordCountReport:
    """Count the words of ``inputs`` and write ``counts.csv`` and ``report.json`` to
    ``output``, a directory (local, or shared by the cluster's nodes) or an
    ``s3://bucket/prefix`` (see :func:`~xor_ack_dynamodb.spark.sink.output_location`).
    With ``config`` None the job runs without tracking (no DynamoDB; a record that
    raises then fails the Spark job, as it would in any job).

    The shuffle uses ``partitions`` reduce partitions (default: half Spark's default
    parallelism, from 1 to 8: each file costs one stamp per reduce partition it has words
    in).
    """
    started = time.perf_counter()
    run_id = run_id or new_run_id()
    faults = FaultPlan(fail_rate, seed, fail_attempts) if fail_rate else None
    partitions = partitions or max(1, min(8, sc.defaultParallelism // 2))
    location = output_location(output)
    parts = f".parts/{run_id}"
    roots: list[Root] = [
        (i, f"wordcount/{run_id}/{i:04d}-{path.name}", str(path)) for i, path in enumerate(inputs)
    ]
    job = partial(wordcount_job, output=location, parts=parts, faults=faults, partitions=partitions)
    slices = max(1, min(len(roots), sc.defaultParallelism * 2))
    files: list[FileResult]
    if config is None:
        job(UntrackedRDD(sc.parallelize(roots, slices)), 1)
        files = [FileResult(p, k, "untracked", 1, None, acked_attempt=1) for _, k, p in roots]
        requests: Counter[str] = Counter({"requests": 0})
        errors: list[str] = []
    else:
        tracking = Tracking(sc, config, run_id=run_id, after_flush=after_flush)
        report = tracking.run(
            roots,
            operator.itemgetter(1),
            job,
            max_attempts=max_attempts,
            num_slices=slices,
            observer=observer,
        )
        files = []
        for outcome in report.outcomes:
            last = outcome.attempts[-1]
            acked_at = next((n for n, a in enumerate(outcome.attempts, 1) if a.state == "acked"), None)
            error = next((a.reason for a in reversed(outcome.attempts) if a.reason), None)
            files.append(
                FileResult(
                    path=outcome.root[2],
                    tag=last.tag,
                    state=last.state,
                    attempts=len(outcome.attempts),
                    error=error if last.state != "acked" or len(outcome.attempts) > 1 else None,
                    history=[{"tag": a.tag, "state": a.state, "reason": a.reason} for a in outcome.attempts],
                    acked_attempt=acked_at,
                )
            )
        requests, errors = report.counters, report.job_errors
    counts = _final_counts(location, parts, files)
    wall = time.perf_counter() - started
    result = WordCountReport(run_id, config is not None, files, counts, requests, wall, errors)
    write_outputs(result, location)
    if not keep_parts:
        location.remove(parts)
    return result


def _final_counts(location: LocalOutput | S3Output, parts: str, files: Sequence[FileResult]) -> Counter[str]:
    """Sum, per word, the rows each file's acked attempt wrote (and nothing else)."""
    counts: Counter[str] = Counter()
    attempts = {fr.acked_attempt for fr in files if fr.acked_attempt is not None}
    for attempt in sorted(attempts):
        wanted = {i for i, fr in enumerate(files) if fr.acked_attempt == attempt}
        for row in location.read_parts(f"{parts}/attempt-{attempt}"):
            if int(row["file"]) in wanted:
                counts[row["word"]] += int(row["count"])
    return counts


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

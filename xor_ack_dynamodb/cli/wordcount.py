"""``xor-ack wordcount``: the tracked Spark word count (see :mod:`xor_ack_dynamodb.jobs.wordcount.job`).

With no flags it runs on the embedded default: a moto server started in this process on
127.0.0.1 and Spark ``local[*]``, on the DataFrame pipeline (``--api rdd`` runs the RDD
one). ``--endpoint-url``, ``--region`` or ``--table`` point it at a real DynamoDB
(credentials from the usual AWS environment); ``--master`` at a cluster, ``--remote`` at
a Spark Connect server. Under spark-submit the master comes from spark-submit.

Exit status: 0 when every file ended acked, 1 when any did not, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkContext
    from rich.console import Console

    from ..config import AckConfig
    from ..jobs.wordcount.job import WordCountReport
    from ..spark.outcomes import RootOutcome

from .common import emit_json, handle_errors

DEFAULT_TABLE = "xor-ack-wordcount"


def _fail_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {value}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "wordcount",
        help="the tracked Spark word count (one ack chain per file)",
        description=(
            "Count words with Spark, tracking every input file with an ack chain: a file is acked once "
            "all its word counts are durably written; failed files are replayed. With no INPUT, counts the "
            "bundled corpus (examples/data); with no DynamoDB flags, uses an embedded moto server."
        ),
    )
    parser.add_argument(
        "inputs", nargs="*", metavar="INPUT", help="files or directories (default: the bundled corpus)"
    )
    parser.add_argument(
        "--output",
        default="out",
        metavar="DIR",
        help="where counts.csv and report.json go: a directory (default ./out; on a cluster, one "
        "every node shares) or s3://bucket/prefix",
    )
    parser.add_argument("--master", help="Spark master URL (default: local[*], or spark-submit's)")
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="a Spark Connect server (sc://host:port) instead of a master (DataFrame api only)",
    )
    parser.add_argument(
        "--api",
        choices=("frame", "rdd"),
        default="frame",
        help="the pipeline: DataFrames, per-word work in the JVM (frame, default) or tracked RDDs (rdd)",
    )
    parser.add_argument(
        "--bad-bytes",
        choices=("replace", "fail"),
        default="replace",
        help="invalid UTF-8 in a file: count it with U+FFFD and note the file (replace, default), "
        "or fail the file without replaying it (fail)",
    )
    parser.add_argument(
        "--split-size",
        type=_positive,
        metavar="BYTES",
        help="the size of Spark's file splits (DataFrame api: spark.sql.files.maxPartitionBytes, "
        "default 128 MiB)",
    )
    # Own dests: the top-level --table/--endpoint-url/--region carry environment defaults
    # (AWS_REGION is set almost everywhere), which must not switch off the embedded default.
    parser.add_argument(
        "--endpoint-url",
        dest="wc_endpoint_url",
        metavar="URL",
        help="DynamoDB endpoint: use it instead of the embedded one",
    )
    parser.add_argument(
        "--region", dest="wc_region", metavar="REGION", help="AWS region: use real DynamoDB there"
    )
    parser.add_argument(
        "--table",
        dest="wc_table",
        metavar="TABLE",
        help=f"use real DynamoDB, this table (default {DEFAULT_TABLE}; created if missing)",
    )
    parser.add_argument(
        "--fail-rate",
        type=_fail_rate,
        default=0.0,
        metavar="P",
        help="make this fraction of word records raise, in the first --fail-attempts attempts "
        "(deterministic per seed and attempt)",
    )
    parser.add_argument(
        "--fail-attempts",
        type=_positive,
        default=1,
        metavar="N",
        help="attempts in which --fail-rate applies (default 1: replays run clean)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for --fail-rate (default 0)")
    parser.add_argument(
        "--max-attempts", type=_positive, default=3, help="attempts per file, replays included (default 3)"
    )
    parser.add_argument(
        "--partitions",
        type=_positive,
        help="shuffle partitions (rdd default: half the parallelism, 1 to 8; frame default: Spark's, "
        "coalesced by adaptive execution)",
    )
    parser.add_argument(
        "--no-tracking", action="store_true", help="the same job without ack chains or DynamoDB"
    )
    parser.add_argument(
        "--keep-parts", action="store_true", help="keep the per-attempt partition files under OUTPUT/.parts"
    )
    parser.add_argument(
        "--single-writes",
        action="store_true",
        help="one request per create and per stamp, instead of TransactWriteItems of up to 100 chains "
        "(default: transactions, which cost twice the write units per item on DynamoDB)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.set_defaults(func=run)


@handle_errors
def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..errors import XorAckError
    from ..jobs.wordcount.job import default_corpus, find_inputs, run_wordcount
    from ..spark.context import get_context, get_session

    console = Console()
    err = Console(stderr=True, soft_wrap=True)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        inputs = find_inputs(args.inputs or [default_corpus()])
    except (FileNotFoundError, XorAckError) as exc:
        err.print(f"[red]error:[/] {exc}")
        return 2
    if args.remote and args.api == "rdd":
        err.print("[red]error:[/] --remote (Spark Connect) has no RDDs: use --api frame")
        return 2
    # Real DynamoDB when asked for on this command, or when the table is named globally
    # (xor-ack --table T, or XOR_ACK_TABLE); otherwise the embedded moto server.
    real = bool(args.wc_endpoint_url or args.wc_region or args.wc_table or getattr(args, "table", None))
    with ExitStack() as stack:
        config: AckConfig | None = None
        where = "no tracking"
        # The backend (an embedded moto server, the table) gets ready while Spark starts.
        background = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="xor-ack-backend"))
        backend = None if args.no_tracking else background.submit(_backend, args, real, stack)
        spark: Any
        if args.api == "rdd":
            spark, created = get_context(args.master, app_name="xor-ack wordcount")
            sc: SparkContext | None = spark
            spark_name = spark.master
        else:
            spark, created = get_session(args.master, remote=args.remote, app_name="xor-ack wordcount")
            sc = None if args.remote else spark.sparkContext
            spark_name = args.remote if args.remote else spark.sparkContext.master
        if created:
            stack.callback(spark.stop)
        if backend is not None:
            config, where = backend.result()
        err.print(
            f"[bold]xor-ack wordcount[/]: {len(inputs)} files, Spark {spark_name}, {args.api} api, {where}"
        )
        progress = _Progress(sc, err, len(inputs), enabled=not args.quiet)
        try:
            with progress:
                report = run_wordcount(
                    spark,
                    inputs,
                    args.output,
                    config,
                    fail_rate=args.fail_rate,
                    seed=args.seed,
                    fail_attempts=args.fail_attempts,
                    max_attempts=args.max_attempts,
                    partitions=args.partitions,
                    observer=progress,
                    keep_parts=args.keep_parts,
                    api=args.api,
                    bad_bytes=args.bad_bytes,
                    split_bytes=args.split_size,
                    transactions=not args.single_writes,
                )
        except Exception as exc:
            if config is not None:
                raise
            # Without tracking, one record that raises aborts the whole Spark job.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            err.print(f"[red]the Spark job failed (no tracking: nothing to replay):[/] {first}")
            return 1
    if getattr(args, "json", False):
        emit_json(report.to_json())
    else:
        _summary(console, report, args.output)
    return 0 if report.all_acked else 1


def _backend(args: argparse.Namespace, real: bool, stack: ExitStack) -> tuple[AckConfig, str]:
    """The table (created if missing) and how to name it."""
    from ..config import AckConfig
    from ..stores.dynamodb.tracker import XorAckDynamoDB
    from ..testing.moto_server import LocalDynamoDB

    if real:
        endpoint = args.wc_endpoint_url or getattr(args, "endpoint_url", None)
        config = AckConfig(
            table=args.wc_table or getattr(args, "table", None) or DEFAULT_TABLE,
            partition_key=getattr(args, "partition_key", None) or "tagID",
            region=args.wc_region or getattr(args, "region", None),
            endpoint_url=endpoint,
        )
        where = f"DynamoDB table {config.table}" + (f" at {endpoint}" if endpoint else "")
    else:
        local = stack.enter_context(LocalDynamoDB())
        config, where = local.config(DEFAULT_TABLE), f"embedded DynamoDB (moto) at {local.endpoint_url}"
    XorAckDynamoDB.from_config(config).create_table()
    return config, where


class _Progress:
    """A live line while the job runs: attempt, Spark stage and tasks, files acked.

    Polls Spark's status tracker from a thread (not under Spark Connect, which has no
    SparkContext); on the RDD api, files acked come from the run's accumulator, which the
    driver updates as tasks finish.
    """

    def __init__(self, sc: SparkContext | None, console: Console, files: int, *, enabled: bool) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.sc = sc
        self.enabled = enabled
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files acked"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            disable=not enabled,
        )
        self.task = self.progress.add_task("starting", total=files)
        self.attempt = 0
        self.done = 0
        self.total = files
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="wordcount-progress", daemon=True)
        self.tracking: Any = None

    def __enter__(self) -> _Progress:
        self.progress.start()
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self.progress.stop()

    def attempt_started(self, attempt: int, roots: int, tracking: Any) -> None:
        self.attempt = attempt
        self.tracking = tracking
        self._describe("starting")

    def attempt_finished(self, attempt: int, outcomes: Sequence[RootOutcome]) -> None:
        acked = sum(o.acked for o in outcomes)
        self.done += acked
        self._describe("done")
        self.progress.update(self.task, completed=self.done)
        if acked < len(outcomes):
            self.progress.console.print(
                f"attempt {attempt}: {acked} of {len(outcomes)} files acked; "
                f"{len(outcomes) - acked} failed or timed out"
            )

    def _describe(self, stage: str) -> None:
        self.progress.update(self.task, description=f"attempt {self.attempt} · {stage}")

    def _poll(self) -> None:
        tracker = self.sc.statusTracker() if self.sc is not None else None
        while not self._stop.wait(0.25):
            if tracker is None:
                continue
            try:
                stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            except Exception:  # the context is stopping
                return
            live = [s for s in stages if s is not None]
            counters = getattr(self.tracking, "counters", None)
            if counters is not None and hasattr(counters, "value"):
                acked = counters.value.get("chains_acked", 0)
                self.progress.update(self.task, completed=min(self.total, max(self.done, acked)))
            if live:
                stage = live[0]
                self._describe(f"stage {stage.stageId}: {stage.numCompletedTasks}/{stage.numTasks} tasks")


def _summary(console: Console, report: WordCountReport, output: str) -> None:
    from rich.table import Table

    from ..spark.output import Location

    totals = report.totals()
    files = Table(title="files replayed, noted or not acked", show_lines=False)
    for column in ("file", "state", "attempts", "error or note"):
        files.add_column(column)
    shown = [f for f in report.files if f.state != "acked" or f.attempts > 1 or f.note]
    for f in shown:
        style = "green" if f.state in ("acked", "untracked") else "red"
        detail = f.error or f.note or ""
        files.add_row(Path(f.path).name, f"[{style}]{f.state}[/]", str(f.attempts), detail[:80])
    if shown:
        console.print(files)
    summary = Table(title="xor-ack wordcount", caption=f"run {report.run_id}", show_header=False)
    summary.add_column("", style="bold")
    summary.add_column("", justify="right")
    labels = {
        "files": "files",
        "acked": "files acked",
        "failed": "files not acked",
        "replays": "replays",
        "noted": "files noted (bad bytes)",
        "words": "words counted",
        "distinct_words": "distinct words",
        "dynamodb_requests": "DynamoDB requests",
        "requests_per_word": "requests per word",
        "wall_seconds": "wall seconds",
    }
    for key, label in labels.items():
        value = totals[key]
        summary.add_row(
            label, "-" if value is None else (f"{value:.4f}" if key == "requests_per_word" else str(value))
        )
    console.print(summary)
    top = sorted(report.counts.items(), key=lambda item: (-item[1], item[0]))[:5]
    console.print("top words: " + ", ".join(f"{w} {c}" for w, c in top))

    def where(name: str) -> str:  # a directory as the user gave it
        return Location.of(output).describe(name) if output.startswith("s3://") else str(Path(output) / name)

    console.print(f"wrote {where('counts.csv')} and {where('report.json')}")
    if not report.all_acked:
        console.print(f"[red]{totals['failed']} file(s) not acked[/]")

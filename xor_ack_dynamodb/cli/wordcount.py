"""``xor-ack wordcount``: the tracked Spark word count (see :mod:`xor_ack_dynamodb.jobs.wordcount.job`).

With no flags it runs on the embedded default: a moto server started in this process on
127.0.0.1 and Spark ``local[*]``, on the DataFrame pipeline (``--api rdd`` runs the RDD
one). ``--endpoint-url``, ``--region`` or ``--table`` point it at a real DynamoDB
(credentials from the usual AWS environment); ``--master`` at a cluster, ``--remote`` at
a Spark Connect server. Under spark-submit the master comes from spark-submit.

Exit status: 0 when every file ended acked, 1 when any did not, 2 for bad arguments
(:data:`~.common.WORDCOUNT_EXIT_CODES_HELP`); errors in the one form of :mod:`.common`.
Output as the other commands' (:mod:`.output`): tables on a terminal, tab-separated
lines in a pipe, ``--json`` the report.
"""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkContext

    from ..config import AckConfig
    from ..jobs.wordcount.job import WordCountReport
    from ..stores.dynamodb.tracker import XorAckDynamoDB

from .common import WORDCOUNT_EXIT_CODES_HELP, UsageError, error_line
from .output import emit_json, is_terminal, print_rows, stderr_console, stdout_console

DEFAULT_TABLE = "xor-ack-wordcount"
#: Why a file or folder of an INPUT folder was not read (docs/wordcount.md, "Folders").
SKIPPED_NOTE = "not read: Spark's text reader skips this name"


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
        description=textwrap.fill(
            "Count words with Spark, tracking every input file with an ack chain: a file is acked once "
            "all its word counts are durably written; failed files are replayed. With no INPUT, counts the "
            "bundled corpus (24 short texts installed with the package); with no DynamoDB flags, uses an "
            "embedded moto server.",
            88,
        ),
        epilog=WORDCOUNT_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="files, directories (read as Spark's text reader reads them; what it skips is reported) "
        "or s3:// locations (default: the bundled corpus)",
    )
    parser.add_argument(
        "--output",
        default="out",
        metavar="DIR",
        help="where counts.csv and report.json go: a directory (default out; on a cluster, one "
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
        "(deterministic per seed and attempt; default 0)",
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
        help="shuffle partitions (rdd default: the input's, up to twice the parallelism; "
        "frame default: Spark's, coalesced by adaptive execution)",
    )
    parser.add_argument(
        "--no-tracking", action="store_true", help="the same job without ack chains or DynamoDB"
    )
    parser.add_argument(
        "--keep-parts", action="store_true", help="keep the per-attempt partition files under OUTPUT/.parts"
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="keep the chains in this process's memory (MemoryAck), not in DynamoDB: what tracking costs "
        "Spark itself, every request answered at once; nothing is durable (for measuring)",
    )
    parser.add_argument(
        "--single-writes",
        action="store_true",
        help="one request per create and per stamp, instead of TransactWriteItems of up to 100 chains "
        "(default: transactions, which cost twice the write units per item on DynamoDB)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress display (there is none when stderr is not a terminal)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print report.json's content on stdout instead of the summary",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # First, so that an install without the spark extra is told so (one line, exit 2:
    # common.report) before a backend starts.
    import pyspark  # noqa: F401

    from ..config import AckConfig
    from ..jobs.wordcount.job import default_corpus, run_wordcount, select_inputs
    from ..spark.context import get_context, get_session
    from ..spark.progress import RunProgress
    from ..stores.memory import MemoryAck

    err = stderr_console()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.remote and args.api == "rdd":
        raise UsageError("--remote (Spark Connect) has no RDDs: use --api frame")
    try:
        inputs = select_inputs(args.inputs or [default_corpus()])
    except FileNotFoundError as exc:
        raise UsageError(str(exc), kind=type(exc).__name__) from exc
    # Real DynamoDB when asked for on this command, or when the table is named globally
    # (xor-ack --table T, or XOR_ACK_TABLE); otherwise the embedded moto server.
    wants_real = args.wc_endpoint_url or args.wc_region or args.wc_table or getattr(args, "table", None)
    if args.memory and (wants_real or args.no_tracking):
        raise UsageError("--memory keeps the chains in memory: not with a table, an endpoint, --no-tracking")
    real = _real_backend(args) if wants_real and not args.no_tracking else None
    with ExitStack() as stack:
        config: AckConfig | None = None
        where = "no tracking"
        # The backend (an embedded moto server, the table) gets ready while Spark starts.
        background = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="xor-ack-backend"))
        backend = None if args.no_tracking or args.memory else background.submit(_backend, real, stack)
        tracker = MemoryAck() if args.memory else None
        if args.memory:
            config, where = AckConfig(table=DEFAULT_TABLE), "chains in memory (MemoryAck)"
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
        skipped = f" ({len(inputs.skipped)} skipped)" if inputs.skipped else ""
        err.print(
            f"[bold]xor-ack wordcount[/]: {len(inputs.files)} files{skipped}, Spark {spark_name}, "
            f"{args.api} api, {where}"
        )
        progress = RunProgress(sc, err, len(inputs.files), enabled=not args.quiet, unit="files acked")
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
                    started_at=getattr(args, "started_at", None),
                    tracker=tracker,
                )
        except Exception as exc:
            if config is not None:
                raise
            # Without tracking, one record that raises aborts the whole Spark job.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            message = f"the Spark job failed (no tracking: nothing to replay): {first}"
            print(error_line(type(exc).__name__, message), file=sys.stderr)
            return 1
    if getattr(args, "json", False):
        emit_json(report.to_json())
    else:
        _summary(report, args.output)
    return 0 if report.all_acked else 1


def _real_backend(args: argparse.Namespace) -> tuple[AckConfig, XorAckDynamoDB, str]:
    """The real table's config, a tracker on it and how to name it: checked (table name,
    key, region, endpoint) before Spark starts, nothing sent."""
    from ..config import AckConfig
    from ..stores.dynamodb.tracker import XorAckDynamoDB

    endpoint = args.wc_endpoint_url or getattr(args, "endpoint_url", None)
    config = AckConfig(
        table=args.wc_table or getattr(args, "table", None) or DEFAULT_TABLE,
        partition_key=getattr(args, "partition_key", None) or "tagID",
        region=args.wc_region or getattr(args, "region", None),
        endpoint_url=endpoint,
    )
    where = f"DynamoDB table {config.table}" + (f" at {endpoint}" if endpoint else "")
    return config, XorAckDynamoDB.from_config(config), where


def _backend(real: tuple[AckConfig, XorAckDynamoDB, str] | None, stack: ExitStack) -> tuple[AckConfig, str]:
    """The table (created if missing), on ``real`` or else an embedded moto server, and
    how to name it."""
    from ..stores.dynamodb.tracker import XorAckDynamoDB
    from ..testing.moto_server import LocalDynamoDB

    if real is not None:
        config, tracker, where = real
    else:
        local = stack.enter_context(LocalDynamoDB())
        config, where = local.config(DEFAULT_TABLE), f"embedded DynamoDB (moto) at {local.endpoint_url}"
        tracker = XorAckDynamoDB.from_config(config)
    tracker.create_table()
    return config, where


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if key == "requests_per_word" else str(value)


def _summary(report: WordCountReport, output: str) -> None:
    """The run's summary on stdout: rich tables on a terminal; in a pipe, the same rows
    as tab-separated lines (the files replayed, noted or not acked: name, state,
    attempts, error or note; the files and folders skipped: name, ``skipped``, 0, why;
    then label, value), then the top words and where the outputs went."""
    from rich.table import Table

    from ..spark.output import Location

    totals = report.totals()
    shown = [f for f in report.files if f.state != "acked" or f.attempts > 1 or f.note]
    file_rows: list[tuple[Any, ...]] = [
        (Path(f.path).name, f.state, f.attempts, f.error or f.note or "") for f in shown
    ]
    file_rows += [
        (Path(p).name + ("/" if p.endswith("/") else ""), "skipped", 0, SKIPPED_NOTE) for p in report.skipped
    ]
    labels = {
        "files": "files",
        "skipped": "files skipped",
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
    summary_rows: list[tuple[Any, ...]] = [(label, _cell(key, totals[key])) for key, label in labels.items()]
    top = sorted(report.counts.items(), key=lambda item: (-item[1], item[0]))[:5]

    def where(name: str) -> str:  # a directory as the user gave it
        return Location.of(output).describe(name) if output.startswith("s3://") else str(Path(output) / name)

    closing = [
        "top words: " + ", ".join(f"{w} {c}" for w, c in top),
        f"wrote {where('counts.csv')} and {where('report.json')}",
    ]
    if not is_terminal(sys.stdout):
        print_rows(file_rows + summary_rows)
        print("\n".join(closing))
        if not report.all_acked:
            print(f"{totals['failed']} file(s) not acked")
        return
    console = stdout_console()
    if file_rows:
        files = Table(title="files replayed, noted, not acked or skipped", show_lines=False)
        for column in ("file", "state", "attempts", "error or note"):
            files.add_column(column)
        for name, state, attempts, detail in file_rows:
            style = {"acked": "green", "untracked": "green", "skipped": "yellow"}.get(state, "red")
            files.add_row(name, f"[{style}]{state}[/]", str(attempts), detail)
        console.print(files)
    summary = Table(title="xor-ack wordcount", caption=f"run {report.run_id}", show_header=False)
    summary.add_column("", style="bold")
    summary.add_column("", justify="right")
    for label, value in summary_rows:
        summary.add_row(label, str(value))
    console.print(summary)
    for line in closing:
        console.print(line, markup=False, highlight=False)
    if not report.all_acked:
        console.print(f"[red]{totals['failed']} file(s) not acked[/]")

"""Batch calls at scale: ``create_many``, ``touch_many``, ``stamp_many`` and
``status_many`` of 10,000 chains on the local backends, at two concurrencies.

    python -m benchmarks.batch_scale                       # 10,000 chains, both backends
    python -m benchmarks.batch_scale --chains 2000 --backends moto --concurrency 1 2

Each (backend, concurrency) gets a fresh table and runs the four calls in that order on
the same chains (create them, a heartbeat, the stamp that completes each, a read of all
of them plus 100 tags that have no chain), with the client a user gets from
``dynamodb_client()`` (5 s timeouts, botocore's standard retries). Prints a table of wall
time, requests (botocore's resends included), the library's retries and the result's
summary; ``--json PATH`` also writes the rows. The moto server runs in a child process
(benchmarks/server.py), DynamoDB Local in its JVM.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

from xor_ack_dynamodb import StampSpec, XorAckDynamoDB
from xor_ack_dynamodb.stores.dynamodb.clients import dynamodb_client

from .server import ServerProcess

BACKENDS = {"moto": "moto server", "ddblocal": "DynamoDB Local"}


@contextmanager
def endpoint(backend: str) -> Iterator[str]:
    if backend == "moto":
        with ServerProcess() as server:
            yield server.endpoint_url
    else:
        from xor_ack_dynamodb.testing.dynamodb_local import DynamoDBLocal

        with DynamoDBLocal() as local:
            yield local.endpoint_url


def run(
    url: str, backend: str, chains: int, concurrency: int, report: Callable[[dict[str, Any]], None]
) -> None:
    client = dynamodb_client(
        region="us-east-1", endpoint_url=url, aws_access_key_id="local", aws_secret_access_key="local"
    )
    ack = XorAckDynamoDB(f"batch-scale-{time.time_ns()}", client=client, ttl=3600)
    ack.create_table()
    tags = [f"run-1/file-{i:05}" for i in range(chains)]
    roots = {t: ack.new_edge() for t in tags}
    missing = [f"run-1/none-{i}" for i in range(100)]
    calls: list[tuple[str, Callable[[Callable[[int, int], None]], Any]]] = [
        ("create_many", lambda p: ack.create_many(roots, owner="run-1", concurrency=concurrency, progress=p)),
        (
            "touch_many",
            lambda p: ack.touch_many(tags, 600, owner="run-1", concurrency=concurrency, progress=p),
        ),
        (
            "stamp_many",
            lambda p: ack.stamp_many(
                (StampSpec(t, finished=(roots[t],), op_id=f"{t}/done", owner="run-1") for t in tags),
                concurrency=concurrency,
                progress=p,
            ),
        ),
        ("status_many", lambda p: ack.status_many(tags + missing, concurrency=concurrency, progress=p)),
    ]
    for name, call in calls:
        ack.stats.reset()
        progress = Progress(f"{name} c={concurrency}")
        result = call(progress)
        seconds = time.perf_counter() - progress.start
        reports = progress.seen
        requests = ack.stats.requests
        report(
            {
                "backend": BACKENDS[backend],
                "call": name,
                "chains": chains,
                "concurrency": concurrency,
                "seconds": round(seconds, 1),
                "requests": sum(requests.values()),
                "by_operation": requests,
                "retries": ack.stats.events.get("retries", 0),
                "failed": len(getattr(result, "failed", {})),
                "missing": len(getattr(result, "missing", [])),
                "progress_calls": len(reports),
                "progress_last": list(reports[-1]) if reports else None,
                "summary": result.summary(),
            }
        )


class Progress:
    """A batch call's progress callback: records each report, prints every tenth."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.seen: list[tuple[int, int]] = []
        self.start = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        before = self.seen[-1][0] if self.seen else 0
        self.seen.append((done, total))
        if done and (done == total or done * 10 // total != before * 10 // total):
            print(
                f"  {self.label}: {done:,}/{total:,} in {time.perf_counter() - self.start:.1f} s", flush=True
            )


def table(rows: list[dict[str, Any]]) -> Table:
    out = Table(title="Batch calls at scale")
    for column in ("backend", "call", "chains", "concurrency", "seconds", "requests", "retries", "summary"):
        out.add_column(column, justify="right" if column not in ("backend", "call", "summary") else "left")
    for row in rows:
        out.add_row(
            *(str(row[c]) for c in ("backend", "call", "chains", "concurrency", "seconds", "requests")),
            str(row["retries"]),
            row["summary"],
        )
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| backend | call | chains | concurrency | seconds | requests | retries | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['backend']} | `{r['call']}` | {r['chains']:,} | {r['concurrency']} | {r['seconds']} "
            f"| {r['requests']} | {r['retries']} | {r['summary']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chains", type=int, default=10_000)
    parser.add_argument("--backends", nargs="+", choices=sorted(BACKENDS), default=["moto", "ddblocal"])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    console = Console()
    console.print(
        f"Python {platform.python_version()}, {args.chains:,} chains, concurrency {args.concurrency}"
    )
    rows: list[dict[str, Any]] = []

    def report(row: dict[str, Any]) -> None:
        rows.append(row)
        console.print(
            f"{row['backend']} {row['call']} c={row['concurrency']}: {row['seconds']} s, "
            f"{row['requests']} requests, {row['summary']}"
        )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)

    for backend in args.backends:
        with endpoint(backend) as url:
            for concurrency in args.concurrency:
                run(url, backend, args.chains, concurrency, report)
    console.print(table(rows))
    console.print(markdown(rows))


if __name__ == "__main__":
    main()

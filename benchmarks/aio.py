"""The asyncio tracker against the sync one: 64 concurrent stamps on one chain.

``python -m benchmarks.aio``: for each backend and mode, in one run, alternating, 64
tasks of one event loop stamping one chain through one ``AsyncXorAckDynamoDB``, and 64
threads stamping one chain through one ``XorAckDynamoDB``. Each round is a fresh chain of
64 children, every child stamped once (op ids given), released together. Prints
requests per stamp (every HTTP request, botocore's resends included: what DynamoDB
bills), conflicts per stamp, and stamps per second (64 x rounds over the time the stamps
took). Exits 1 if a chain did not end acked with exactly one ``acked`` result.

Backends: the embedded moto server (``LocalDynamoDB``, in a child process so the server
does not share the clients' GIL); DynamoDB Local when ``xor_ack_dynamodb.DynamoDBLocal``
can start (`make dynamodb-local` installs it); any other endpoint given as ``--endpoint NAME=URL``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from rich.console import Console
from rich.table import Table

from xor_ack_dynamodb import RetryPolicy, XorAckDynamoDB
from xor_ack_dynamodb.aio import AsyncXorAckDynamoDB, async_dynamodb_client

from .server import ServerProcess

TASKS = 64
#: A budget 64 writers on one xor chain do not exhaust (the default's 50 attempts can be).
PATIENT = RetryPolicy(max_attempts=400, max_seconds=120, initial_wait=0.002, max_wait=0.2)
_tables = itertools.count()


@dataclass
class Figures:
    stamps: int = 0
    seconds: float = 0.0
    requests: int = 0
    conflicts: int = 0
    wrong: int = 0  # rounds whose chain did not end acked with exactly one acked result

    def add(self, seconds: float, stats: dict[str, int], acked: int, state: str) -> None:
        self.stamps += TASKS
        self.seconds += seconds
        self.requests += stats.get("requests", 0)
        self.conflicts += stats.get("conflicts", 0)
        self.wrong += acked != 1 or state != "acked"


@dataclass
class Row:
    backend: str
    mode: str
    driver: str
    figures: Figures = field(default_factory=Figures)


def sync_client(endpoint: str) -> Any:
    return boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    ).client("dynamodb", endpoint_url=endpoint, config=Config(max_pool_connections=TASKS))


def sync_round(endpoint: str, mode: str, figures: Figures) -> None:
    ack = XorAckDynamoDB(f"bench-aio-{next(_tables)}", client=sync_client(endpoint), mode=mode, retry=PATIENT)
    ack.create_table()
    root = ack.new_edge()
    ack.create("chain", root)
    kids = [ack.new_edge() for _ in range(TASKS)]
    ack.stamp("chain", finished=[root], started=kids, op_id="root")
    ack.stats.reset()
    barrier = threading.Barrier(TASKS + 1)
    acked: list[bool] = []

    def work(i: int) -> None:
        barrier.wait()
        acked.append(ack.stamp("chain", finished=[kids[i]], op_id=f"kid-{i}").acked)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(TASKS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    stats = ack.stats.snapshot()
    figures.add(elapsed, stats, sum(acked), ack.status("chain").state)


async def async_round(endpoint: str, mode: str, figures: Figures) -> None:
    async with async_dynamodb_client(
        region="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        retry=PATIENT,
        config=Config(max_pool_connections=TASKS),
    ) as client:
        ack = AsyncXorAckDynamoDB(f"bench-aio-{next(_tables)}", client=client, mode=mode, retry=PATIENT)
        await ack.create_table()
        root = ack.new_edge()
        await ack.create("chain", root)
        kids = [ack.new_edge() for _ in range(TASKS)]
        await ack.stamp("chain", finished=[root], started=kids, op_id="root")
        ack.stats.reset()
        started = time.perf_counter()
        results = await asyncio.gather(
            *(ack.stamp("chain", finished=[k], op_id=f"kid-{i}") for i, k in enumerate(kids))
        )
        elapsed = time.perf_counter() - started
        stats = ack.stats.snapshot()
        figures.add(elapsed, stats, sum(r.acked for r in results), (await ack.status("chain")).state)


@contextlib.contextmanager
def backends(extra: list[str], console: Console) -> Iterator[list[tuple[str, str]]]:
    """(name, endpoint) of every backend that could start."""
    with contextlib.ExitStack() as stack:
        found = [("moto server", stack.enter_context(ServerProcess()).endpoint_url)]
        try:
            from xor_ack_dynamodb import DynamoDBLocal

            local = stack.enter_context(DynamoDBLocal())
            found.append(("DynamoDB Local", local.endpoint_url))
        except Exception as exc:  # no java, no jar: say so, go on
            console.print(f"[yellow]DynamoDB Local not measured: {exc!r}")
        for spec in extra:
            name, _, url = spec.partition("=")
            found.append((name, url))
        yield found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="chains per backend, mode and driver")
    parser.add_argument("--endpoint", action="append", default=[], metavar="NAME=URL")
    args = parser.parse_args(argv)
    console = Console(width=130)
    rows: list[Row] = []
    with backends(args.endpoint, console) as found:
        for (name, endpoint), mode in itertools.product(found, ("xor", "sum")):
            sync_row, async_row = (
                Row(name, mode, f"sync, {TASKS} threads"),
                Row(name, mode, f"async, {TASKS} tasks"),
            )
            for _ in range(args.rounds):  # alternating, so both see the same machine load
                sync_round(endpoint, mode, sync_row.figures)
                asyncio.run(async_round(endpoint, mode, async_row.figures))
            rows += [sync_row, async_row]
            console.print(f"measured {name}, {mode}")
    table = Table(title=f"{TASKS} concurrent stamps on one chain ({args.rounds} chains each)")
    for column in ("backend", "mode", "tracker", "requests/stamp", "conflicts/stamp", "stamps/s", "wrong"):
        left = column in ("backend", "mode", "tracker")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    for row in rows:
        f = row.figures
        table.add_row(
            row.backend,
            row.mode,
            row.driver,
            f"{f.requests / f.stamps:.2f}",
            f"{f.conflicts / f.stamps:.2f}",
            f"{f.stamps / f.seconds:.0f}",
            str(f.wrong),
        )
    console.print(table)
    return 1 if any(row.figures.wrong for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())

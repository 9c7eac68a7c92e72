"""What each local DynamoDB gets wrong, measured: one table, one column per backend.

    python scripts/backends.py [--ttl-wait S] [--rate-seconds S]

Starts moto in-process (``mock_aws``), moto's own threaded server, the library's
``LocalDynamoDB`` (a moto server that serializes requests), dynalite (npm) and DynamoDB
Local (Java), and runs every probe of ``tests/reliability/backends.py`` on each: ALL_OLD
on a failed condition, the TTL API and whether TTL deletes expired items, BatchGetItem's
UnprocessedKeys past 16 MB, ReturnConsumedCapacity, exact big-number ADD, list operations
on a List of Binary, a 16-thread conditional-increment race (successes vs final value)
and conditional UpdateItem requests per second from one thread. docs/testing.md quotes
the result. A backend that cannot start here (no node, no java) is reported and left out.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from reliability import backends as probes  # noqa: E402
from reliability.ddblocal import install_dynamodb_local, unavailable  # noqa: E402
from reliability.dynalite import Dynalite, node_available  # noqa: E402

from xor_ack_dynamodb import DynamoDBLocal, LocalDynamoDB  # noqa: E402

NewClient = Callable[[], Any]


def _session_client(endpoint: str) -> NewClient:
    def new() -> Any:
        return boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        ).client("dynamodb", endpoint_url=endpoint)

    return new


@contextlib.contextmanager
def moto_inprocess() -> Iterator[NewClient]:
    from moto import mock_aws

    with mock_aws():
        yield lambda: boto3.client("dynamodb", region_name="us-east-1")


@contextlib.contextmanager
def moto_threaded() -> Iterator[NewClient]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield _session_client(f"http://{host}:{port}")
    finally:
        server.stop()


@contextlib.contextmanager
def local_moto() -> Iterator[NewClient]:
    with LocalDynamoDB() as server:
        yield _session_client(server.endpoint_url or "")


@contextlib.contextmanager
def dynalite() -> Iterator[NewClient]:
    if not node_available():
        raise RuntimeError("node/npm not installed")
    with Dynalite() as server:
        yield _session_client(server.endpoint_url or "")


@contextlib.contextmanager
def dynamodb_local() -> Iterator[NewClient]:
    if (reason := unavailable()) is not None:
        raise RuntimeError(reason)
    with DynamoDBLocal(install_dynamodb_local().parent) as server:
        yield _session_client(server.endpoint_url or "")


BACKENDS: dict[str, Callable[[], contextlib.AbstractContextManager[NewClient]]] = {
    "moto in-process": moto_inprocess,
    "moto server (as shipped)": moto_threaded,
    "moto server (LocalDynamoDB)": local_moto,
    "dynalite": dynalite,
    "DynamoDB Local": dynamodb_local,
}


def _yes(value: bool) -> str:
    return "yes" if value else "[red]no[/red]"


def measure(new_client: NewClient, ttl_wait: float, rate_seconds: float) -> dict[str, str]:
    client = new_client()
    # moto's backends live in this process: every server here shares them.
    table = probes.make_table(client, f"probe-{uuid.uuid4().hex[:12]}")
    row: dict[str, str] = {}
    for op, ok in probes.all_old_on_failed_condition(client, table).items():
        row[f"ALL_OLD on failed {op}"] = _yes(ok)
    ttl = probes.ttl_api(client, table)
    row["TTL API"] = "yes" if ttl == "ok" else f"[red]{ttl}[/red]"
    if ttl == "ok":
        swept = probes.ttl_sweep(client, table, ttl_wait)
        gone = f"after {swept} s" if swept is not None else f"not in {ttl_wait:g} s"
        row["TTL deletes an expired item"] = gone
    else:
        row["TTL deletes an expired item"] = "-"
    got, left = probes.batch_get_over_16_mb(client, table)
    row["BatchGetItem, 50 x 390 KB"] = f"{got} items, {left} UnprocessedKeys"
    row["ReturnConsumedCapacity"] = _yes(probes.consumed_capacity(client, table))
    row["ADD of 27-digit integers exact"] = _yes(probes.add_big_number(client, table))
    for name, ok in probes.binary_list_ops(client, table).items():
        row[{"list_append": "list_append (List of B)", "contains": "contains(ops, :binary)",
             "remove_two": "REMOVE ops[0], ops[1]"}[name]] = _yes(ok)
    wins, final = probes.conditional_race(new_client, table)
    row["16-thread conditional race: successes / final"] = (
        f"{wins} / {final}" if wins == final else f"[red]{wins} / {final}[/red]"
    )
    row["conditional UpdateItem/s, 1 thread"] = f"{probes.conditional_rate(client, table, rate_seconds):.0f}"
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ttl-wait", type=float, default=15.0, help="seconds to wait for a TTL deletion")
    parser.add_argument("--rate-seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
    )
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    console = Console(width=max(Console().width, 160))
    columns: dict[str, dict[str, str]] = {}
    for name, start in BACKENDS.items():
        console.print(f"probing {name} ...")
        try:
            with start() as new_client:
                columns[name] = measure(new_client, args.ttl_wait, args.rate_seconds)
        except RuntimeError as exc:
            console.print(f"  {name} left out: {exc}")
    out = Table(title="What each local DynamoDB does")
    out.add_column("probe", style="bold")
    for name in columns:
        out.add_column(name, justify="right")
    for probe in next(iter(columns.values()), {}):
        out.add_row(probe, *(column.get(probe, "-") for column in columns.values()))
    console.print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Batch calls against the endpoints a user meets locally: the stock ``moto_server``, the
library's ``python -m xor_ack_dynamodb.testing.serve``, and a server killed mid-batch.

    python -m benchmarks.batch_endpoints --json benchmarks/batch_endpoints.json

``servers``: ``create_many`` of 1,000 chains (``--chains``) with and without transactions
on each server command in a child process on 127.0.0.1, with the client a user gets from
``dynamodb_client()``; wall time, the server's peak RSS (sampled every 0.2 s from /proc)
and the result. A server past 2 GiB of RSS, or a run past 120 s, is SIGKILLed and the row
says so (the batch then ends on the dead endpoint).

``death``: ``create_many`` and ``stamp_many`` of 10,000 chains at concurrency 2 on the
library's server, SIGKILLed once 3,000 are settled: how long the batch runs on after the
death, and how each chain is reported.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from xor_ack_dynamodb import StampSpec, XorAckDynamoDB
from xor_ack_dynamodb.core.batch import BatchResult
from xor_ack_dynamodb.stores.dynamodb.clients import dynamodb_client

RSS_LIMIT = 2 * 1024**3
TIME_LIMIT = 120.0
SERVE = "python -m xor_ack_dynamodb.testing.serve"
COMMANDS = {
    "stock moto_server": ["moto_server", "-p", "0"],
    SERVE: [sys.executable, "-m", "xor_ack_dynamodb.testing.serve", "-p", "0"],
}


class Child:
    """A server command in a child process, its port found from /proc (moto_server prints
    nothing parseable before serving), its RSS watched."""

    def __init__(self, command: list[str]) -> None:
        if command[0] == "moto_server":
            command = [str(_bin("moto_server")), *command[1:]]
            command[-1] = str(_free_port())
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.port = int(command[-1]) if command[-1] != "0" else self._printed_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._wait_listening()
        self.peak = 0
        self.killed: str | None = None
        self.killed_at: float | None = None
        self.started = time.monotonic()
        threading.Thread(target=self._watch, daemon=True).start()

    def _printed_port(self) -> int:
        assert self.proc.stdout is not None
        found = re.search(r"127\.0\.0\.1:(\d+)", self.proc.stdout.readline())
        assert found
        return int(found.group(1))

    def _wait_listening(self) -> None:
        import socket

        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def rss(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def _watch(self) -> None:
        while self.proc.poll() is None:
            try:
                rss = self.rss()
            except OSError:
                return
            self.peak = max(self.peak, rss)
            elapsed = time.monotonic() - self.started
            if rss > RSS_LIMIT or elapsed > TIME_LIMIT:
                self.killed = f"killed at {rss / 2**20:,.0f} MiB after {elapsed:.0f} s"
                self.kill()
                return
            time.sleep(0.2)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.killed_at = time.monotonic()

    def tracker(self, table: str | None = None) -> XorAckDynamoDB:
        client = dynamodb_client(
            region="us-east-1",
            endpoint_url=self.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        return XorAckDynamoDB(table or f"endpoints-{time.time_ns()}", client=client, ttl=3600)


def _bin(name: str) -> Any:
    from pathlib import Path

    return Path(sys.executable).parent / name


def _free_port() -> int:
    from xor_ack_dynamodb.testing.endpoint import free_port

    return free_port()


def _counts(result: BatchResult[Any]) -> dict[str, Any]:
    unsent = sum("not sent: the last" in str(e) for e in result.failed.values())
    by_type = {name: len(tags) for name, tags in result.failures_by_type().items()}
    return {"ok": len(result.ok), "failed": len(result.failed), "unsent": unsent, "by_type": by_type}


def servers(chains: int, report: Callable[[dict[str, Any]], None]) -> None:
    for name, command in COMMANDS.items():
        for transactions in (True, False):
            child = Child(command)
            try:
                ack = child.tracker()
                ack.create_table()
                started = time.monotonic()
                roots = {f"c{i:05}": ack.new_edge() for i in range(chains)}
                result = ack.create_many(roots, transactions=transactions)
                seconds = time.monotonic() - started
                report(
                    {
                        "kind": "servers",
                        "server": name,
                        "transactions": transactions,
                        "chains": chains,
                        "seconds": round(seconds, 1),
                        "peak_rss_mib": round(child.peak / 2**20),
                        "killed": child.killed,
                        "killed_after_s": None
                        if child.killed_at is None
                        else round(child.killed_at - child.started),
                        **_counts(result),
                        "summary": result.summary(),
                    }
                )
            finally:
                if child.proc.poll() is None:
                    child.kill()


def death(chains: int, at: int, report: Callable[[dict[str, Any]], None]) -> None:
    for call in ("create_many", "stamp_many"):
        child = Child(COMMANDS[SERVE])
        try:
            ack = child.tracker()
            ack.create_table()
            tags = [f"c{i:05}" for i in range(chains)]
            roots = {t: ack.new_edge() for t in tags}

            def progress(done: int, total: int, child: Child = child) -> None:
                if child.killed_at is None and done >= at:
                    child.kill()

            started = time.monotonic()
            if call == "create_many":
                result = ack.create_many(roots, concurrency=2, progress=progress)
            else:
                assert ack.create_many(roots, concurrency=2).failed == {}
                specs = [StampSpec(t, finished=(roots[t],), op_id=f"{t}/done") for t in tags]
                started = time.monotonic()
                result = child.tracker(ack.table).stamp_many(specs, concurrency=2, progress=progress)
            ended = time.monotonic()
            assert child.killed_at is not None
            report(
                {
                    "kind": "death",
                    "call": call,
                    "chains": chains,
                    "killed_at_settled": at,
                    "concurrency": 2,
                    "seconds_before_death": round(child.killed_at - started, 1),
                    "seconds_after_death": round(ended - child.killed_at, 1),
                    **_counts(result),
                    "summary": result.summary(),
                }
            )
        finally:
            if child.proc.poll() is None:
                child.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=1000, help="chains per server run (default 1,000)")
    parser.add_argument("--death-chains", type=int, default=10_000)
    parser.add_argument("--death-at", type=int, default=3_000)
    parser.add_argument("--only", choices=["servers", "death"])
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []

    def report(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    print(f"# Python {platform.python_version()}, {platform.machine()}", flush=True)
    if args.only in (None, "servers"):
        servers(args.chains, report)
    if args.only in (None, "death"):
        death(args.death_chains, args.death_at, report)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)
            out.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

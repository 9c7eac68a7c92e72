"""``python -m xor_ack_dynamodb.testing.serve -p 5000``: the embedded moto server
(:class:`~.moto_server.MotoServer`) in the foreground, for the local setups of the docs.

It serves what the stock ``moto_server -p 5000`` serves (DynamoDB and its streams, SQS,
S3...) on the same flags, with the embedded server's fixes: one request at a time, so
that each conditional write is atomic as on DynamoDB, and a ``TransactWriteItems`` that
copies only the items it names. The stock server copies the whole table once per entry
of a transaction and keeps every copy (moto tracks every model object it ever built),
so a batch call with transactions there slows and grows with the square of the table
(docs/performance.md, "Batch calls at scale").

It prints the endpoint once listening and runs until interrupted (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Sequence

from .moto_server import MotoServer

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the embedded moto server until SIGINT or SIGTERM; returns the exit status (0).
    A port already in use raises :class:`OSError` before anything is served."""
    parser = argparse.ArgumentParser(
        prog="python -m xor_ack_dynamodb.testing.serve",
        description="moto's server with xor-ack-dynamodb's fixes (serialized requests, "
        "transactions that copy only the items they name), in the foreground",
    )
    parser.add_argument("-H", "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("-p", "--port", type=int, default=5000, help="port (default 5000; 0: a free one)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with MotoServer(args.host, args.port) as server:
        print(f"embedded DynamoDB (moto) listening on {server.endpoint_url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

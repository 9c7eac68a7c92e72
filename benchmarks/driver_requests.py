"""What the tracked DataFrame driver's DynamoDB requests cost on a backend, without Spark.

The DataFrame driver makes, per root, one create and one stamp (and reads only chains
whose outcome its stamps did not return). This times exactly those calls, as the driver
makes them (``create_chains`` and ``apply_acks`` with their thread pool), on ``n``
fresh chains, and the same chains through ``create_many``/``stamp_many``
(TransactWriteItems of up to 100; on real DynamoDB a transactional write costs twice the
write units of a single one), so that the Spark benchmark can state the per-request
cost each backend adds to the tracked wall time, measured in the same run.

    .venv/bin/python -m benchmarks.driver_requests [--n 520] [--endpoint-url URL | --ddblocal]
"""

from __future__ import annotations

import argparse
import dataclasses
import secrets
import time
from typing import Any

from xor_ack_dynamodb import AckConfig, StampSpec, XorAckDynamoDB
from xor_ack_dynamodb.spark.attempts import DRIVER_THREADS
from xor_ack_dynamodb.spark.chains import apply_acks, create_chains
from xor_ack_dynamodb.spark.tags import group_for

__all__ = ["measure"]


def _edges(n: int, prefix: str) -> dict[str, int]:
    return {f"{prefix}/{i:05d}": secrets.randbits(64) | 1 for i in range(n)}


def _one_mode(config: AckConfig, mode: str, n: int, threads: int, transactions: bool) -> dict[str, Any]:
    cfg = dataclasses.replace(config, mode=mode)
    tracker = XorAckDynamoDB.from_config(cfg)
    group = group_for(mode, 8)
    owner = "bench-" + secrets.token_hex(4)

    def requests() -> int:
        return int(tracker.stats.snapshot()["requests"])

    edges = _edges(n, f"{owner}/single")
    before, clock = requests(), time.perf_counter()
    create_chains(tracker, edges, group, "c", owner=owner, threads=threads)
    middle = time.perf_counter()
    stamps = {t: group.finished(e) for t, e in edges.items()}
    counts = apply_acks(tracker, stamps, {}, group, "s", owner=owner, threads=threads)
    end = time.perf_counter()
    single = requests() - before
    assert counts["chains_acked"] == n, counts

    result: dict[str, Any] = {
        "single": {
            "create_s": round(middle - clock, 3),
            "stamp_s": round(end - middle, 3),
            "requests": single,
            "ms_per_request": round(1000 * (end - clock) / single, 3),
        },
        "transactions": {"skipped": "left out (moto copies the table per transaction item)"},
    }
    if not transactions:
        return result
    edges = _edges(n, f"{owner}/many")
    before, clock2 = requests(), time.perf_counter()
    created = tracker.create_many({t: group.value(e) for t, e in edges.items()})
    middle2 = time.perf_counter()
    acked = tracker.stamp_many([StampSpec(t, group.value(group.finished(e))) for t, e in edges.items()])
    end2 = time.perf_counter()
    many = requests() - before
    assert not any(isinstance(r, Exception) for r in created.values())
    assert all(getattr(r, "acked", False) for r in acked.values()), acked
    result["transactions"] = {
        "create_s": round(middle2 - clock2, 3),
        "stamp_s": round(end2 - middle2, 3),
        "requests": many,
    }
    return result


def measure(
    config: AckConfig, n: int = 520, threads: int = DRIVER_THREADS, *, transactions: bool = True
) -> dict[str, Any]:
    """Seconds for ``n`` creates then ``n`` completing stamps, per mode: single requests
    from ``threads`` threads (what the driver does), and transactions of up to 100
    (``create_many``, ``stamp_many``), after an untimed warm-up of 100 chains per mode.
    Every chain must end acked (checked)."""
    out: dict[str, Any] = {"n": n, "threads": threads}
    for mode in ("xor", "sum"):  # warm-up (a fresh DynamoDB Local JVM is slow at first)
        _one_mode(config, mode, min(n, 100), threads, transactions)
    for mode in ("xor", "sum"):
        out[mode] = _one_mode(config, mode, n, threads, transactions)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=520)
    parser.add_argument("--endpoint-url")
    parser.add_argument("--ddblocal", action="store_true")
    args = parser.parse_args()
    from contextlib import ExitStack

    with ExitStack() as stack:
        if args.ddblocal:
            from xor_ack_dynamodb import DynamoDBLocal

            endpoint = stack.enter_context(DynamoDBLocal()).config("x").endpoint_url
        elif args.endpoint_url:
            endpoint = args.endpoint_url
        else:
            from .server import ServerProcess

            endpoint = stack.enter_context(ServerProcess()).endpoint_url
        config = AckConfig(
            table="bench-driver-requests",
            endpoint_url=endpoint,
            region="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        XorAckDynamoDB.from_config(config).create_table()
        import json

        # moto's TransactWriteItems copies the table per item: left out there.
        txn = bool(args.ddblocal or args.endpoint_url)
        print(json.dumps(measure(config, args.n, transactions=txn), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

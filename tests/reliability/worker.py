"""A stamping worker process: ``python -m tests.reliability.worker`` (from the repo root).

Reads one JSON line from stdin: ``{"endpoint": ..., "table": ..., "jobs": [[tag,
stamp_hex, op_id], ...], "max_attempts": N, "max_seconds": S}``; builds its own client
and tracker; prints ``{"ready": true}``; waits for a line ``go``; then stamps the jobs in
order, printing one JSON line per job as soon as it returns (``ok``, ``acked``,
``requests``, ``seconds``, or ``error`` with the error's class name). The parent may
SIGKILL it at any moment: a printed line means that stamp returned.
"""

from __future__ import annotations

import json
import sys
import time

import boto3

from xor_ack_dynamodb import RetryPolicy, XorAckDynamoDB

from .faults import FaultInjector, FaultRates, client_config


def main() -> int:
    plan = json.loads(sys.stdin.readline())
    meter = FaultInjector(FaultRates(), enabled=False)  # counts requests, injects nothing
    client = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    ).client("dynamodb", endpoint_url=plan["endpoint"], config=client_config(4))
    meter.attach(client)
    retry = RetryPolicy(max_attempts=plan.get("max_attempts", 50), max_seconds=plan.get("max_seconds", 60.0))
    tracker = XorAckDynamoDB(plan["table"], client=client, retry=retry, ttl=plan.get("ttl", 3600))
    print(json.dumps({"ready": True}), flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    for tag, stamp_hex, op_id in plan["jobs"]:
        sent = meter.requests_on_this_thread()
        started = time.perf_counter()
        line: dict[str, object] = {"op": op_id}
        try:
            value = tracker.stamp(tag, bytes.fromhex(stamp_hex), op_id=op_id)
            line.update(ok=True, acked=value.acked)
        except Exception as exc:  # noqa: BLE001 - reported to the parent by name
            line.update(ok=False, error=type(exc).__name__)
        line.update(requests=meter.requests_on_this_thread() - sent, seconds=time.perf_counter() - started)
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

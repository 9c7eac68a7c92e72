"""The measurements. Each returns plain figures; nothing here prints.

A timed workload runs ``threads`` threads that each repeat one operation until the
deadline, then finish the call in progress; its rate is completed operations over the
wall time from the common start until the last thread is done.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import boto3
from botocore.config import Config

from xor_ack_dynamodb import MemoryAck, XorAckDynamoDB, errors, new_stamp
from xor_ack_dynamodb.combiner import CombiningTracker
from xor_ack_dynamodb.core.chain import Chain, Op
from xor_ack_dynamodb.stores.dynamodb.item import ItemCodec
from xor_ack_dynamodb.testing.moto_server import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

from .itemsize import ItemMeter, item_size, write_units

__all__ = [
    "Measured",
    "make_client",
    "raw_updates",
    "stamps_on_one_chain",
    "stamps_on_distinct_chains",
    "memory_ack_peak",
    "item_sizes",
]

STAMP_BYTES = 16
_runs = itertools.count()


@dataclass
class Measured:
    """One timed workload's figures."""

    name: str
    threads: int
    mode: str  # "raw", "plain", "combined"
    ops: int  # completed operations (stamps, or raw writes)
    failed: int  # calls that raised (StaleLocalData: the retry budget was spent)
    seconds: float
    requests: int  # HTTP requests, botocore's resends included
    writes: int  # conditional write attempts among them
    latencies: list[float] = field(repr=False, default_factory=list)
    ok: bool = True  # the chain's final value is the XOR of every stamp that returned
    events: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    @property
    def requests_per_op(self) -> float:
        return self.requests / self.ops if self.ops else float("nan")

    @property
    def writes_per_op(self) -> float:
        return self.writes / self.ops if self.ops else float("nan")

    def percentile_ms(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @classmethod
    def merge(cls, runs: list[Measured]) -> Measured:
        """Several runs of one workload as one (rounds interleaved with another
        workload's, so that both see the same machine load)."""
        first = runs[0]
        events: dict[str, int] = {}
        for m in runs:
            for k, v in m.events.items():
                events[k] = events.get(k, 0) + v
        return cls(
            first.name,
            first.threads,
            first.mode,
            sum(m.ops for m in runs),
            sum(m.failed for m in runs),
            sum(m.seconds for m in runs),
            sum(m.requests for m in runs),
            sum(m.writes for m in runs),
            [x for m in runs for x in m.latencies],
            all(m.ok for m in runs),
            events,
        )

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "threads": self.threads,
            "mode": self.mode,
            "ops": self.ops,
            "failed": self.failed,
            "seconds": round(self.seconds, 3),
            "rate": round(self.rate, 1),
            "requests": self.requests,
            "writes": self.writes,
            "requests_per_op": round(self.requests_per_op, 3),
            "writes_per_op": round(self.writes_per_op, 3),
            "p50_ms": round(self.percentile_ms(0.50), 2),
            "p99_ms": round(self.percentile_ms(0.99), 2),
            "ok": self.ok,
            "events": self.events,
        }


def make_client(endpoint_url: str) -> Any:
    """The one client every workload uses: a connection per thread, botocore's default
    retries."""
    session = boto3.session.Session(
        aws_access_key_id=LOCAL_KEY_ID, aws_secret_access_key=LOCAL_SECRET, region_name=LOCAL_REGION
    )
    return session.client("dynamodb", endpoint_url=endpoint_url, config=Config(max_pool_connections=64))


@dataclass
class _Timing:
    ops: int
    failed: int
    seconds: float
    latencies: list[float]


def _timed(threads: int, seconds: float, operation: Callable[[int], bool]) -> _Timing:
    """Run ``operation(i)`` in ``threads`` threads for ``seconds``; it returns False for
    a counted failure."""
    ready = threading.Barrier(threads + 1)
    deadline = [0.0]
    latencies: list[list[float]] = [[] for _ in range(threads)]
    failures = [0] * threads
    raised: list[BaseException] = []

    def loop(i: int) -> None:
        ready.wait()
        mine = latencies[i]
        try:
            while time.perf_counter() < deadline[0]:
                start = time.perf_counter()
                ok = operation(i)
                mine.append(time.perf_counter() - start)
                if not ok:
                    failures[i] += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            raised.append(exc)

    workers = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    deadline[0] = time.perf_counter() + seconds
    ready.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - start
    if raised:
        raise raised[0]
    failed = sum(failures)
    return _Timing(sum(map(len, latencies)) - failed, failed, wall, [x for lat in latencies for x in lat])


def raw_updates(client: Any, table: str, threads: int, seconds: float, max_ops: int = 32) -> Measured:
    """The limit: the conditional PutItem that ``stamp()`` sends on a chain whose op
    list is full (the whole item, conditioned on its write token), encoded by the
    library's own item codec and sent straight from the client, each thread on its own
    item so that every one succeeds. The gap between this and ``stamp()`` is what the
    library adds."""
    now, run = int(time.time()), next(_runs)
    codec = ItemCodec("tagID")
    chains: list[Chain] = []
    for i in range(threads):
        chain = Chain(
            tag=f"raw/{run}/{i}",
            mode="xor",
            value=new_stamp(STAMP_BYTES),
            deadline=now + 3600,
            purge_at=now + 3600 + 5 + 86400,
            token=secrets.token_bytes(8),
            version=1,
            seq=max_ops,
            ops=tuple(Op(secrets.token_bytes(8), secrets.token_bytes(4)) for _ in range(max_ops)),
            window=max_ops,
            create_op=Op(secrets.token_bytes(8), secrets.token_bytes(4)),
            created_at=now,
            updated_at=now,
        )
        chains.append(chain)
        client.put_item(TableName=table, Item=codec.encode(chain))

    def update(i: int) -> bool:
        old = chains[i]
        new = replace(
            old,
            value=new_stamp(STAMP_BYTES),
            ops=old.ops[1:] + (Op(secrets.token_bytes(8), secrets.token_bytes(4)),),
            seq=old.seq + 1,
            version=old.version + 1,
            token=secrets.token_bytes(8),
            updated_at=int(time.time()),
        )
        client.put_item(
            TableName=table,
            Item=codec.encode(new),
            ConditionExpression="#tok = :tok",
            ExpressionAttributeNames={"#tok": "tok"},
            ExpressionAttributeValues={":tok": {"B": old.token}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        chains[i] = new
        return True

    for i in range(threads):  # warm the connections
        update(i)
    timing = _timed(threads, seconds, update)
    return Measured(
        "raw conditional PutItem",
        threads,
        "raw",
        timing.ops,
        0,
        timing.seconds,
        timing.ops,
        timing.ops,
        timing.latencies,
    )


def _stamping(
    client: Any, table: str, tags: list[str], threads: int, seconds: float, combined: bool, name: str
) -> Measured:
    tracker = XorAckDynamoDB(table, client=client)
    target: XorAckDynamoDB | CombiningTracker = CombiningTracker(tracker) if combined else tracker
    roots = {tag: new_stamp(STAMP_BYTES) for tag in tags}
    for tag, root in roots.items():
        tracker.create(tag, root)
    applied = [0] * threads  # each thread's XOR of the stamps that returned, as an int

    def stamp(i: int) -> bool:
        delta = new_stamp(STAMP_BYTES)
        try:
            target.stamp(tags[i % len(tags)], delta)
        except errors.StaleLocalData:
            return False
        applied[i] ^= int.from_bytes(delta)
        return True

    tracker.stats.reset()
    timing = _timed(threads, seconds, stamp)
    stats = tracker.stats.snapshot()
    ok = True
    for tag, root in roots.items():
        expected = int.from_bytes(root)
        for i in range(threads):
            if tags[i % len(tags)] == tag:
                expected ^= applied[i]
        ok = ok and int.from_bytes(tracker.status(tag).stamp) == expected
    requests = stats.pop("requests")
    # The conditional writes: an xor stamp is a PutItem of the whole item.
    writes = sum(stats.get(f"requests.{op}", 0) for op in ("PutItem", "UpdateItem", "DeleteItem"))
    return Measured(
        name,
        threads,
        "combined" if combined else "plain",
        timing.ops,
        timing.failed,
        timing.seconds,
        requests,
        writes,
        timing.latencies,
        ok,
        {k: v for k, v in stats.items() if not k.startswith("requests")},
    )


def stamps_on_one_chain(client: Any, table: str, threads: int, seconds: float, combined: bool) -> Measured:
    """``threads`` threads stamping one chain as fast as they can."""
    tag = f"one-chain/{next(_runs)}/{threads}/{'combined' if combined else 'plain'}"
    return _stamping(client, table, [tag], threads, seconds, combined, "one chain")


def stamps_on_distinct_chains(client: Any, table: str, threads: int, seconds: float) -> Measured:
    """``threads`` threads, each stamping its own chain through one shared tracker."""
    run = next(_runs)
    tags = [f"distinct/{run}/{i}" for i in range(threads)]
    return _stamping(client, table, tags, threads, seconds, False, "distinct chains")


def memory_ack_peak(chains: int) -> dict[str, float]:
    """Peak and retained memory (tracemalloc) of a ``MemoryAck`` holding ``chains`` open
    chains of 16-byte stamps, tags and stamps included."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        tracker = MemoryAck()
        for i in range(chains):
            tracker.create(f"root/{i:08d}", new_stamp(STAMP_BYTES))
        current, peak = tracemalloc.get_traced_memory()
        assert len(tracker) == chains
    finally:
        tracemalloc.stop()
    return {
        "chains": chains,
        "peak_mib": (peak - before) / 2**20,
        "retained_mib": (current - before) / 2**20,
        "bytes_per_chain": (current - before) / chains,
    }


def item_sizes(client: Any, table: str, tag: str, mode: str) -> list[dict[str, Any]]:
    """The billed size of one chain's item as stamps land on it, read back after 0, 1,
    ``max_ops`` (the default window, 8) and 128 stamps (and, in sum mode, after
    ``max_ops + 39``). An xor chain's write that would hold ``max_ops + 40`` op ids
    moves the oldest 40 to a history item instead, so its item stops at ``max_ops +
    39``. A sum chain appends without reading; the stamp whose ``ADD`` takes the list
    to ``max_ops + 40`` moves a block of 40 out: its largest item is the one that
    ``ADD`` wrote, taken from the ``ALL_NEW`` answer (``largest``). Stamps come from one
    writer; under concurrent writers the list runs further past the threshold before
    the move lands (see the process runs)."""
    metered = make_client(client.meta.endpoint_url)
    meter = ItemMeter(metered)
    tracker = XorAckDynamoDB(table, client=metered, mode=mode)  # type: ignore[arg-type]
    max_ops = tracker.max_ops
    root = tracker.new_edge()
    edges = [tracker.new_edge() for _ in range(128)]
    tracker.create(tag, root)

    def size(stamps: int, largest: bool = False) -> dict[str, Any]:
        if largest:
            bytes_, ops = max(meter.item_bytes), meter.item_ops
        else:
            item = client.get_item(TableName=table, Key={"tagID": {"S": tag}}, ConsistentRead=True)["Item"]
            bytes_, ops = item_size(item), len(item["ops"]["L"])
        return {
            "mode": mode,
            "stamps": stamps,
            "ops": ops,
            "bytes": bytes_,
            "wcu": write_units(bytes_),
            "largest": largest,
            "tag_bytes": len(tag.encode()),
        }

    # Stamp 1 finishes the root and starts the children; each later one finishes a child.
    sizes = [size(0)]
    tracker.stamp(tag, finished=[root], started=edges)
    sizes.append(size(1))
    slack = tracker.rules.slack
    points = (max_ops, max_ops + slack - 1, 128) if mode == "sum" else (max_ops, 128)
    done = 1
    for target in points:
        while done < target:
            tracker.stamp(tag, finished=[edges[done - 1]])
            done += 1
        sizes.append(size(done))
    if mode == "sum":
        sizes.append(size(done, largest=True))
    return sizes

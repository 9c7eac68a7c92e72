"""Stamping random trees from many threads through faulty clients, checking every step.

Each thread has its own tracker and its own client (as separate workers would), every
client has the fault injector attached, and the stamps of a batch of chains are shuffled
together so that threads race on the same chains in a random order.
"""

from __future__ import annotations

import functools
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import boto3

from xor_ack_dynamodb import RetryPolicy, XorAckDynamoDB

from .faults import FaultInjector, client_config
from .workload import SUM, XOR, ChainTruth, Tree, Verdict, random_tree

__all__ = ["RunResult", "TrackerFactory", "run_trees", "make_trees", "settle", "unique_table"]


#: Held while a client is built from the shared session (a session is not thread-safe).
_SESSION_LOCK = threading.Lock()


@functools.cache
def _session() -> Any:
    """The one boto3 session every reliability client is built from (under
    ``_SESSION_LOCK``). Each client is still its own: its endpoint, connection pool,
    retry configuration and event hooks (botocore copies the session's hooks into each
    client, so an injector attached to one client sees only its requests). A new session
    per client parsed botocore's endpoint rules and the DynamoDB model again each time:
    half the CPU of a fault scenario (py-spy, sum mode on the moto server)."""
    return boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )


def unique_table(prefix: str) -> str:
    """A table name no other test of this session uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def make_trees(
    count: int,
    rng: random.Random,
    prefix: str,
    max_nodes: int = 12,
    mode: str = "xor",
    min_nodes: int = 0,
) -> list[Tree]:
    """``count`` random trees whose edges are of ``mode`` (bytes for xor, ints for sum)."""
    group = SUM if mode == "sum" else XOR
    return [
        random_tree(f"{prefix}-{i}", rng, max_nodes=max_nodes, min_nodes=min_nodes, group=group)
        for i in range(count)
    ]


@dataclass
class TrackerFactory:
    """Builds trackers of ``mode`` on new clients (botocore retries configured
    explicitly) with the injector attached."""

    endpoint_url: str
    table: str
    injector: FaultInjector
    botocore_attempts: int = 4
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    mode: str = "xor"
    max_ops: int = 32

    def client(self) -> Any:
        with _SESSION_LOCK:
            client = _session().client(
                "dynamodb", endpoint_url=self.endpoint_url, config=client_config(self.botocore_attempts)
            )
        return self.injector.attach(client)

    def __call__(self, retry: RetryPolicy | None = None) -> XorAckDynamoDB:
        return XorAckDynamoDB(
            self.table,
            client=self.client(),
            retry=retry or self.retry,
            mode=self.mode,  # type: ignore[arg-type]
            max_ops=self.max_ops,
        )


@dataclass
class RunResult:
    chains: int = 0
    stamps: int = 0
    verdict: Verdict = field(default_factory=Verdict)
    errors: list[BaseException] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)  # HTTP requests per successful stamp
    final_states: Counter[str] = field(default_factory=Counter)
    not_acked: list[str] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)  # the trackers' (trims, duplicates...)
    seconds: float = 0.0

    @property
    def max_attempts(self) -> int:
        return max(self.attempts, default=0)


def run_trees(
    trees: list[Tree],
    factory: TrackerFactory,
    *,
    threads: int,
    batch: int,
    rng: random.Random,
    on_error: Callable[[Tree, int, BaseException], None] | None = None,
    serial_chains: bool = False,
) -> tuple[RunResult, dict[str, ChainTruth]]:
    """Create every chain, then stamp every node of every tree from ``threads`` threads in
    a random order (batch by batch), checking each returned value. Errors that escape the
    library are collected (and passed to ``on_error``), not raised.

    In sum mode a node is stamped only after its parent's stamp returned (level by level,
    in a random order within a level): a finish that lands before the stamp that started
    its edge takes the sum below zero, which the library reads as a double application
    and fails the chain (docs/concepts.md). xor mode takes the stamps in any order.

    With ``serial_chains``, each chain's stamps (in a random order) are made one after
    another by one thread, chains in parallel: no other op lands on a chain while one of
    its stamps is retried, so however long faults delay a resend, it never outlives the
    chain's op-id window (the library's dedup guarantee: a duplicate is caught while
    fewer than ``max_ops`` other ops have landed since the original)."""
    result = RunResult(chains=len(trees), stamps=sum(t.size for t in trees))
    truths = {t.tag: ChainTruth(t) for t in trees}
    local = threading.local()
    lock = threading.Lock()
    injector = factory.injector
    started = time.monotonic()

    def tracker() -> XorAckDynamoDB:
        if not hasattr(local, "tracker"):
            local.tracker = factory()
            with lock:
                all_trackers.append(local.tracker)
        return local.tracker  # type: ignore[no-any-return]

    all_trackers: list[XorAckDynamoDB] = []
    created: set[str] = set()

    def create(tree: Tree) -> None:
        try:
            tracker().create(tree.tag, tree.edges[0], op_id=f"{tree.tag}/create")
            with lock:
                created.add(tree.tag)
        except Exception as exc:  # noqa: BLE001 - every escape is counted and reported
            with lock:
                result.errors.append(exc)
            if on_error:
                on_error(tree, -1, exc)

    def stamp(tree: Tree, node: int) -> None:
        truth = truths[tree.tag]
        before = truth.start(node)
        sent = injector.requests_on_this_thread()
        try:
            value = tracker().stamp(
                tree.tag, finished=tree.finished(node), started=tree.started(node), op_id=tree.op_id(node)
            )
        except Exception as exc:  # noqa: BLE001
            with lock:
                result.errors.append(exc)
            if on_error:
                on_error(tree, node, exc)
            return
        attempts = injector.requests_on_this_thread() - sent
        truth.returned_value(node, value, before)
        with lock:
            result.attempts.append(attempts)

    with ThreadPoolExecutor(threads) as pool:
        for start in range(0, len(trees), batch):
            group = trees[start : start + batch]
            list(pool.map(create, group))
            live = [t for t in group if t.tag in created]
            if serial_chains:
                orders = [(t, _order(t, rng)) for t in live]
                list(pool.map(lambda job: [stamp(job[0], n) for n in job[1]], orders))
                continue
            work = [(t, n) for t in live for n in range(t.size)]
            rng.shuffle(work)
            for level in _levels(work):
                list(pool.map(lambda job: stamp(*job), level))
    result.seconds = time.monotonic() - started
    for tracker_ in all_trackers:
        result.requests.update(tracker_.stats.requests)
        result.events.update(tracker_.stats.events)
    return result, truths


def _ordered(tree: Tree) -> bool:
    """Whether ``tree``'s stamps must come after their parents' (sum mode)."""
    return tree.group is SUM


def _order(tree: Tree, rng: random.Random) -> list[int]:
    """One chain's stamps in a random order (parents first in sum mode)."""
    nodes = rng.sample(range(tree.size), tree.size)
    return sorted(nodes, key=tree.level) if _ordered(tree) else nodes


def _levels(work: list[tuple[Tree, int]]) -> list[list[tuple[Tree, int]]]:
    """``work`` (shuffled) cut into rounds: one round in xor mode; in sum mode one per
    level, so that a parent's stamp has returned before its children's are made."""
    rounds: dict[int, list[tuple[Tree, int]]] = {}
    for tree, node in work:
        rounds.setdefault(tree.level(node) if _ordered(tree) else 0, []).append((tree, node))
    return [rounds[k] for k in sorted(rounds)]


def settle(result: RunResult, truths: dict[str, ChainTruth], reader: XorAckDynamoDB) -> None:
    """Close the books: every chain's final state (BatchGetItem, through the faults) and
    the verdict over every chain."""
    for truth in truths.values():
        truth.finish()
        result.verdict.merge(truth.verdict)
    tags = list(truths)
    states = reader.status_many(tags)
    for tag in tags:
        state = states[tag].state if tag in states else "missing"
        result.final_states[state] += 1
        if state != "acked":
            result.not_acked.append(tag)

"""The contract suite's harness: every tracker, on every backend, in both modes.

A test takes ``harness`` and builds trackers with ``harness.make(**options)``; trackers
built in one test share one table (or, in memory, one store), as trackers of different
processes share a DynamoDB table. The configurations:

* tracker: ``plain`` (``XorAckDynamoDB``, or ``MemoryAck`` on the memory backend),
  ``combining`` (``CombiningTracker`` around it) and ``async`` (``AsyncXorAckDynamoDB`` on
  an aiobotocore client, or ``AsyncMemoryAck``; driven through ``aio_helpers.Blocking``,
  each call a task of one event loop, so the same test bodies run it, and threads that
  call at once are concurrent tasks). The async tracker runs on every backend but moto
  in-process, which does not serve aiobotocore's HTTP client;
* backend: ``memory``, ``inproc`` (moto in-process), ``server`` (a moto server over HTTP,
  requests serialized), ``dynalite``, ``ddblocal`` (Amazon's DynamoDB Local);
* mode: ``xor`` and ``sum``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aio_helpers import Blocking, LoopThread
from conftest import Clock

from xor_ack_dynamodb import CombiningTracker, MemoryAck, XorAckDynamoDB
from xor_ack_dynamodb.aio import AsyncAckTracker, AsyncMemoryAck, AsyncXorAckDynamoDB
from xor_ack_dynamodb.interfaces import AckTracker
from xor_ack_dynamodb.stamps import Stamp

#: backend name -> the fixture that gives its client (None: in memory).
BACKENDS: dict[str, str | None] = {
    "memory": None,
    "inproc": "inproc_client",
    "server": "server_client",
    "dynalite": "dynalite_client",
    "ddblocal": "ddblocal_client",
}
#: Backends whose conditional writes are atomic under threads (moto in-process is not).
ATOMIC = {"memory", "server", "dynalite", "ddblocal"}
#: Backends the async tracker cannot reach: moto in-process answers botocore's own
#: sender only, not aiobotocore's aiohttp one.
NOT_ASYNC = {"inproc"}
KINDS = ("plain", "combining", "async")

_tables = itertools.count()


@dataclass
class Harness:
    """One configuration: ``make(**options)`` builds a tracker on the shared table."""

    kind: str
    backend: str
    mode: str
    clock: Clock
    client: Any = None
    table: str = ""
    loop: LoopThread | None = None
    _first: MemoryAck | AsyncMemoryAck | None = field(default=None, repr=False)

    @property
    def atomic(self) -> bool:
        return self.backend in ATOMIC

    @property
    def dynamodb(self) -> bool:
        return self.backend != "memory"

    def make(self, **options: Any) -> Any:
        """A tracker of this configuration. ``options`` are the tracker's (``ttl``,
        ``max_ops``, ``delete_on_ack``, ``skew``, ``mode``, ...); ``clock`` defaults to
        the harness's."""
        options.setdefault("clock", self.clock)
        options.setdefault("mode", self.mode)
        plain: Any
        if self.kind == "async":
            return self._make_async(**options)
        if self.backend == "memory":
            plain = MemoryAck(share=self._first, **options)
            if self._first is None:
                self._first = plain
        else:
            plain = XorAckDynamoDB(self.table, client=self.client, **options)
        tracker = CombiningTracker(plain) if self.kind == "combining" else plain
        assert isinstance(tracker, AckTracker)
        return tracker

    def _make_async(self, **options: Any) -> Any:
        assert self.loop is not None
        tracker: Any
        if self.backend == "memory":
            tracker = AsyncMemoryAck(share=self._first, **options)
            if self._first is None:
                self._first = tracker
        else:
            client = self.loop.client(self.client.meta.endpoint_url)
            tracker = AsyncXorAckDynamoDB(self.table, client=client, **options)
        assert isinstance(tracker, AsyncAckTracker)
        blocking = Blocking(tracker, self.loop)
        assert isinstance(blocking, AckTracker)
        return blocking

    def plain(self, tracker: Any) -> Any:
        """The tracker under a combining wrapper (for its store and stats)."""
        return tracker.tracker if isinstance(tracker, CombiningTracker) else tracker

    def edge(self, tracker: Any) -> Any:
        return tracker.new_edge()

    def zero(self) -> Any:
        return Stamp(bytes(16)) if self.mode == "xor" else 0


def _configs(atomic_only: bool = False) -> list[Any]:
    out = []
    for kind, backend, mode in itertools.product(KINDS, BACKENDS, ("xor", "sum")):
        if atomic_only and backend not in ATOMIC:
            continue
        if kind == "async" and backend in NOT_ASYNC:
            continue
        marks = [pytest.mark.server] if backend == "server" else []
        out.append(pytest.param((kind, backend, mode), id=f"{kind}-{backend}-{mode}", marks=marks))
    return out


@pytest.fixture(scope="session")
def aio_loop() -> Iterator[LoopThread]:
    """One event loop (in a thread) for every async configuration of the session."""
    loop = LoopThread()
    yield loop
    loop.close()


def _harness(request: pytest.FixtureRequest, clock: Clock) -> Harness:
    kind, backend, mode = request.param
    fixture = BACKENDS[backend]
    h = Harness(kind, backend, mode, clock)
    if kind == "async":
        h.loop = request.getfixturevalue("aio_loop")
    if fixture is not None:
        h.client = request.getfixturevalue(fixture)
        h.table = f"contract-{next(_tables)}"
        # CreateTable and a quick poll until ACTIVE: the contract needs no TTL sweep,
        # and create_table()'s waiter (1 s polls) and TTL calls would triple each
        # test's time.
        h.client.create_table(
            TableName=h.table,
            AttributeDefinitions=[{"AttributeName": "tagID", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "tagID", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        while h.client.describe_table(TableName=h.table)["Table"]["TableStatus"] != "ACTIVE":
            time.sleep(0.01)
    return h


@pytest.fixture(params=_configs())
def harness(request: pytest.FixtureRequest, clock: Clock) -> Harness:
    return _harness(request, clock)


@pytest.fixture(params=_configs(atomic_only=True))
def atomic_harness(request: pytest.FixtureRequest, clock: Clock) -> Harness:
    """Only the configurations whose backend applies conditional writes atomically under
    threads (moto in-process does not: ``DESIGN.md`` section 13)."""
    return _harness(request, clock)


@pytest.fixture
def ack(harness: Harness) -> Any:
    """A tracker of the configuration, with a one-hour ttl."""
    return harness.make(ttl=3600)


def requests_of(tracker: Any) -> int:
    """Requests the tracker (under any wrapper) has made so far."""
    return int(tracker.stats.total_requests)


MakeTracker = Callable[..., Any]

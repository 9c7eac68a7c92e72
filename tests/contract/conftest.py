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

import asyncio
import inspect
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from aio_helpers import Blocking, LoopThread
from aio_scripted import AsyncScript
from botocore.config import Config
from conftest import HAS_AIOBOTOCORE, Clock
from scripted import Script

from xor_ack_dynamodb import CombiningTracker, MemoryAck, XorAckDynamoDB
from xor_ack_dynamodb.aio import AsyncAckTracker, AsyncMemoryAck, AsyncXorAckDynamoDB
from xor_ack_dynamodb.interfaces import AckTracker
from xor_ack_dynamodb.stamps import Stamp
from xor_ack_dynamodb.stores.dynamodb.clients import client_settings, open_client

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
#: The asyncio kind runs in the async test leg alone (its venv has aiobotocore; the main
#: leg's has the newest botocore, which aiobotocore does not accept yet): Makefile's test-async.
KINDS = ("plain", "combining") + (("async",) if HAS_AIOBOTOCORE else ())

_tables = itertools.count()


class Lost(Exception):
    """A memory store's response lost after (or, for ``fail``, instead of) applying."""


class MemoryFaults:
    """``scripted.Script``'s ``lose``/``fail`` for a tracker's memory store: the next
    request of a kind (``Add``, ``Put``...) is applied and then raises a transient
    error (``lose``, after running ``after``), or raises one without being applied."""

    def __init__(self, store: Any) -> None:
        self._steps: deque[tuple[str, str, Callable[[], Any] | None]] = deque()
        original = store.execute
        store.is_transient = lambda error: isinstance(error, Lost)

        def step(request: Any) -> tuple[str, Callable[[], Any] | None] | None:
            if self._steps and type(request).__name__ in self._steps[0][1].split("|"):
                action, _, after = self._steps.popleft()
                return action, after
            return None

        if inspect.iscoroutinefunction(original):

            async def execute_async(request: Any) -> Any:
                armed = step(request)
                if armed is None:
                    return await original(request)
                if armed[0] == "lose":
                    await original(request)
                    if armed[1] is not None:
                        # Off the loop: ``after`` drives other trackers of this loop.
                        await asyncio.to_thread(armed[1])
                raise Lost(armed[0])

            store.execute = execute_async
        else:

            def execute(request: Any) -> Any:
                armed = step(request)
                if armed is None:
                    return original(request)
                if armed[0] == "lose":
                    original(request)
                    if armed[1] is not None:
                        armed[1]()
                raise Lost(armed[0])

            store.execute = execute

    def lose(self, operation: str, after: Callable[[], Any] | None = None) -> MemoryFaults:
        self._steps.append(("lose", operation, after))
        return self

    def fail(self, operation: str, times: int = 1) -> MemoryFaults:
        self._steps.extend(("fail", operation, None) for _ in range(times))
        return self

    @property
    def pending(self) -> int:
        return len(self._steps)


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
    cleanups: list[Callable[[], Any]] = field(default_factory=list, repr=False)

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
            plain = XorAckDynamoDB(self.table, client=options.pop("client", None) or self.client, **options)
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
            client = options.pop("client", None) or self.loop.client(self.client.meta.endpoint_url)
            tracker = AsyncXorAckDynamoDB(self.table, client=client, **options)
        assert isinstance(tracker, AsyncAckTracker)
        blocking = Blocking(tracker, self.loop)
        assert isinstance(blocking, AckTracker)
        return blocking

    def faulty(self, **options: Any) -> tuple[Any, Any]:
        """A tracker of this configuration on a client (or, in memory, a store) of its
        own, and the fault script of its requests: ``lose(op, after=)``, ``fail(op,
        times)``, ``pending``, where ``op`` is :meth:`write` (or another request)."""
        if self.backend == "memory":
            tracker = self.make(**options)
            plain = self.plain(tracker)
            store = plain.driver.store
            return tracker, MemoryFaults(store)
        url = self.client.meta.endpoint_url
        if self.kind == "async":
            assert self.loop is not None
            settings = client_settings(
                region="us-east-1",
                endpoint_url=url,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
            context = open_client(settings)
            client = self.loop.run(context.__aenter__())
            loop = self.loop
            self.cleanups.append(lambda: loop.run(context.__aexit__(None, None, None)))
            return self.make(client=client, **options), AsyncScript(client)
        client = boto3.client(
            "dynamodb",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
        )
        return self.make(client=client, **options), Script(client)

    def bystander(self, **options: Any) -> Any:
        """Another writer of the chain, for a fault script's ``after``, which runs on the
        event loop's thread for an async tracker on DynamoDB: there a plain tracker on
        the same table (a blocking call to an async one from the loop would deadlock)."""
        if self.kind == "async" and self.backend != "memory":
            options.setdefault("clock", self.clock)
            options.setdefault("mode", self.mode)
            return XorAckDynamoDB(self.table, client=self.client, **options)
        return self.make(**options)

    def write(self, mode: str | None = None) -> str:
        """The request a stamp's write is, as the fault script names it."""
        sum_mode = (mode or self.mode) == "sum"
        if self.backend == "memory":
            return "Add" if sum_mode else "Put"
        return "UpdateItem" if sum_mode else "PutItem"

    def plain(self, tracker: Any) -> Any:
        """The tracker under a combining wrapper (for its store and stats)."""
        return tracker.tracker if isinstance(tracker, CombiningTracker) else tracker

    def edge(self, tracker: Any) -> Any:
        return tracker.new_edge()

    def zero(self) -> Any:
        return Stamp(bytes(16)) if self.mode == "xor" else 0


def _configs(
    atomic_only: bool = False,
    modes: tuple[str, ...] = ("xor", "sum"),
    backends: set[str] | None = None,
    kinds: tuple[str, ...] = KINDS,
) -> list[Any]:
    out = []
    for kind, backend, mode in itertools.product(kinds, BACKENDS, modes):
        if atomic_only and backend not in ATOMIC:
            continue
        if backends is not None and backend not in backends:
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


def _served(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Harness]:
    h = _harness(request, clock)
    yield h
    for cleanup in h.cleanups:
        cleanup()


@pytest.fixture(params=_configs())
def harness(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Harness]:
    yield from _served(request, clock)


@pytest.fixture(params=_configs(atomic_only=True))
def atomic_harness(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Harness]:
    """Only the configurations whose backend applies conditional writes atomically under
    threads (moto in-process does not: ``DESIGN.md`` section 13)."""
    yield from _served(request, clock)


# The whole-life suite (test_once.py) runs each scenario where its behaviour differs: the
# memory store (its own code), DynamoDB through botocore's HTTP path (a moto server:
# conditions, ALL_OLD on a failed condition, the resend handler), dynalite (no ALL_OLD:
# a rejected guard is followed by a read) and, for races, DynamoDB Local (atomic under
# threads, as DynamoDB). moto in-process runs the same codec as the server, non-atomic.
ONCE = {"memory", "server"}


@pytest.fixture(params=_configs(backends=ONCE | {"dynalite"}))
def guard_harness(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Harness]:
    """``once_harness`` and dynalite, for what a rejected guard does next."""
    yield from _served(request, clock)


@pytest.fixture(params=_configs(backends={"memory"}))
def long_harness(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Harness]:
    """For the long scenarios (hundreds of stamps): every kind, in memory (what differs
    on DynamoDB, the guard's rejection and the history's reads, the shorter scenarios
    run there)."""
    yield from _served(request, clock)


@pytest.fixture(params=_configs(backends={"ddblocal"}))
def race_harness(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Harness]:
    """DynamoDB Local: conditional writes atomic under threads, as DynamoDB's."""
    yield from _served(request, clock)


@pytest.fixture(params=_configs(backends=ONCE, modes=("sum",)))
def sum_harness(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Harness]:
    """The sum-mode configurations (for what only a sum can show: a negative value)."""
    yield from _served(request, clock)


@pytest.fixture
def ack(harness: Harness) -> Any:
    """A tracker of the configuration, with a one-hour ttl."""
    return harness.make(ttl=3600)


def requests_of(tracker: Any) -> int:
    """Requests the tracker (under any wrapper) has made so far."""
    return int(tracker.stats.total_requests)


MakeTracker = Callable[..., Any]

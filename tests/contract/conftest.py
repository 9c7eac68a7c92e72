"""The contract suite's harness: every tracker, on every backend, in both modes.

A test takes ``harness`` and builds trackers with ``harness.make(**options)``; trackers
built in one test share one table (or, in memory, one store), as trackers of different
processes share a DynamoDB table. The configurations:

* tracker: ``plain`` (``XorAckDynamoDB``, or ``MemoryAck`` on the memory backend) and
  ``combining`` (``CombiningTracker`` around it);
* backend: ``memory``, ``inproc`` (moto in-process), ``server`` (a moto server over HTTP,
  requests serialized), ``dynalite``, ``ddblocal`` (Amazon's DynamoDB Local);
* mode: ``xor`` and ``sum``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import Clock

from xor_ack_dynamodb import CombiningTracker, MemoryAck, XorAckDynamoDB
from xor_ack_dynamodb.protocol import AckTracker
from xor_ack_dynamodb.stamps import Stamp

#: backend name -> the fixture that gives its client (None: in memory).
BACKENDS: dict[str, str | None] = {
    "memory": None,
    "inproc": "inproc_client",
    "server": "server_client",
    "dynalite": "dynalite_client",
}
#: Backends whose conditional writes are atomic under threads (moto in-process is not).
ATOMIC = {"memory", "server", "dynalite", "ddblocal"}

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
    _first: MemoryAck | None = field(default=None, repr=False)

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
        if self.backend == "memory":
            plain = MemoryAck(share=self._first, **options)
            if self._first is None:
                self._first = plain
        else:
            plain = XorAckDynamoDB(self.table, client=self.client, **options)
        tracker = CombiningTracker(plain) if self.kind == "combining" else plain
        assert isinstance(tracker, AckTracker)
        return tracker

    def plain(self, tracker: Any) -> Any:
        """The tracker under a combining wrapper (for its store and stats)."""
        return tracker.tracker if isinstance(tracker, CombiningTracker) else tracker

    def edge(self, tracker: Any) -> Any:
        return tracker.new_edge()

    def zero(self) -> Any:
        return Stamp(bytes(16)) if self.mode == "xor" else 0


def _configs(atomic_only: bool = False) -> list[Any]:
    out = []
    for kind, backend, mode in itertools.product(("plain", "combining"), BACKENDS, ("xor", "sum")):
        if atomic_only and backend not in ATOMIC:
            continue
        marks = [pytest.mark.server] if backend == "server" else []
        out.append(pytest.param((kind, backend, mode), id=f"{kind}-{backend}-{mode}", marks=marks))
    return out


def _harness(request: pytest.FixtureRequest, clock: Clock) -> Harness:
    kind, backend, mode = request.param
    fixture = BACKENDS[backend]
    h = Harness(kind, backend, mode, clock)
    if fixture is not None:
        h.client = request.getfixturevalue(fixture)
        h.table = f"contract-{next(_tables)}"
        XorAckDynamoDB(h.table, client=h.client).create_table()
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

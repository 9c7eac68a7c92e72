"""Counters: what a tracker asked of DynamoDB and how often it had to retry
(:class:`RequestStats`), and the one progress bar that shows a count of work done to a
person (:func:`progress_bar`: the command line's batch commands and word count, a
tracked Spark run's ``RunProgress``)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

__all__ = ["RequestStats", "progress_bar"]


class RequestStats:
    """Thread-safe counters for one tracker.

    ``requests`` counts HTTP requests by operation, botocore's own resends included (what
    DynamoDB bills). ``events`` counts ``conflicts`` (a conditional write lost a race),
    ``retries`` (attempts the library made again) and ``duplicates`` (a stamp found its
    op id already applied). ``capacity_units`` sums the read and write capacity units
    DynamoDB reported as consumed by successful requests (``ReturnConsumedCapacity``;
    0.0 on backends that report none). Requests that fail (a lost conditional write
    among them) also consume capacity but carry no ConsumedCapacity in their error
    response, so the figure is a lower bound.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[str] = Counter()
        self._events: Counter[str] = Counter()
        self._capacity = 0.0

    def request(self, operation: str, count: int = 1) -> None:
        with self._lock:
            self._requests[operation] += count

    def add(self, event: str, count: int = 1) -> None:
        with self._lock:
            self._events[event] += count

    def add_capacity(self, units: float) -> None:
        if units:
            with self._lock:
                self._capacity += units

    @property
    def capacity_units(self) -> float:
        with self._lock:
            return self._capacity

    @property
    def requests(self) -> dict[str, int]:
        with self._lock:
            return dict(self._requests)

    @property
    def total_requests(self) -> int:
        with self._lock:
            return sum(self._requests.values())

    @property
    def events(self) -> dict[str, int]:
        with self._lock:
            return dict(self._events)

    def snapshot(self) -> dict[str, int]:
        """Every counter in one flat dict: ``requests``, ``requests.<Operation>``, and the
        events."""
        with self._lock:
            flat = {f"requests.{k}": v for k, v in sorted(self._requests.items())}
            flat["requests"] = sum(self._requests.values())
            flat.update(sorted(self._events.items()))
            return flat

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._events.clear()
            self._capacity = 0.0

    def __repr__(self) -> str:
        """Every count, read at once: ``RequestStats(requests=3 {GetItem: 1, PutItem: 2},
        conflicts=1, retries=1, capacity_units=3)``, the events present in name order
        (``print(ack.stats)`` shows the same)."""
        with self._lock:
            total = sum(self._requests.values())
            by_operation = ", ".join(f"{op}: {n}" for op, n in sorted(self._requests.items()))
            events = "".join(f", {name}={n}" for name, n in sorted(self._events.items()))
            capacity = self._capacity
        requests = f"{total} {{{by_operation}}}" if by_operation else str(total)
        return f"RequestStats(requests={requests}{events}, capacity_units={capacity:g})"


def progress_bar(unit: str, console: Console, *, enabled: bool = True, transient: bool = False) -> Progress:
    """The bar: spinner, description, bar, ``done/total unit``, time elapsed, drawn on
    ``console``; ``enabled=False`` draws nothing (its updates still count)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
        disable=not enabled,
    )

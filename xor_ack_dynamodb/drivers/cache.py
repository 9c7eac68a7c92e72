"""The last known value of recently used chains, so a stamp can go straight to the write."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")

#: History blocks a tracker keeps (40 op ids each, about 5 KB in memory).
HISTORY_BLOCKS = 2048


class LastKnown(Generic[V]):
    """A thread-safe LRU map from tag to the last value read or written.

    A value here may be stale (another writer may have changed the chain since): it is
    only ever used as the expected old value of a conditional write, which the table
    rejects if it is stale. ``size`` 0 disables it.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tag: str) -> V | None:
        with self._lock:
            value = self._items.get(tag)
            if value is not None:
                self._items.move_to_end(tag)
            return value

    def put(self, tag: str, value: V) -> None:
        if self._size <= 0:
            return
        with self._lock:
            self._items[tag] = value
            self._items.move_to_end(tag)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def reserve(self, count: int) -> None:
        """Keep at least ``count`` values from now on (a batch that stamps what it created:
        past the cache, each stamp would read its chain again). A disabled cache stays off."""
        with self._lock:
            if self._size > 0:
                self._size = max(self._size, count)

    def discard(self, tag: str) -> None:
        with self._lock:
            self._items.pop(tag, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

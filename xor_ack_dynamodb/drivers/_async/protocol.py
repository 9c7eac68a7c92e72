"""The one interface every tracker of a flavour (sync or asyncio) implements, so pipeline
code can take any of them; mypy checks callers and trackers on exactly its signatures.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ...core.algebra import Mode
from ...stats import RequestStats
from ..base import same_signature
from .tracker import AsyncTracker


@runtime_checkable
class AsyncAckTracker(Protocol):
    """A tracker of ack chains: :class:`~xor_ack_dynamodb.drivers.AsyncTracker`'s public
    methods, with its signatures and docstrings (taken by
    :func:`~xor_ack_dynamodb.drivers.base.same_signature`)."""

    @property
    def mode(self) -> Mode: ...

    @property
    def stats(self) -> RequestStats: ...

    @same_signature(AsyncTracker.new_edge)
    def new_edge(self, *args: Any, **kwargs: Any) -> Any: ...

    @same_signature(AsyncTracker.create)
    def create(self, *args: Any, **kwargs: Any) -> Any: ...

    @same_signature(AsyncTracker.stamp)
    def stamp(self, *args: Any, **kwargs: Any) -> Any: ...

    @same_signature(AsyncTracker.fail)
    def fail(self, *args: Any, **kwargs: Any) -> Any: ...

    @same_signature(AsyncTracker.touch)
    def touch(self, *args: Any, **kwargs: Any) -> Any: ...

    @same_signature(AsyncTracker.status)
    def status(self, *args: Any, **kwargs: Any) -> Any: ...

    @same_signature(AsyncTracker.status_many)
    def status_many(self, *args: Any, **kwargs: Any) -> Any: ...

    @same_signature(AsyncTracker.delete)
    def delete(self, *args: Any, **kwargs: Any) -> Any: ...

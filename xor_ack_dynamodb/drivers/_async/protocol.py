"""The one interface every tracker of a flavour (sync or asyncio) implements, so pipeline
code can take any of them. Its signatures are taken by :func:`same_signature` from
:class:`~xor_ack_dynamodb.drivers.AsyncTracker`, where each is written once with its
guarantees and errors; mypy checks callers and trackers on exactly those.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, runtime_checkable

from ...core.algebra import Mode
from ...stats import RequestStats
from .tracker import AsyncTracker

__all__ = ["AsyncAckTracker"]

P = ParamSpec("P")
R = TypeVar("R")


def same_signature(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[[Callable[..., Any]], Callable[Concatenate[Any, P], R]]:
    """Give the decorated protocol member ``method``'s signature (its ``self`` any
    class's) and docstring; ``inspect.signature`` shows it too (``__wrapped__``)."""
    return lambda member: functools.update_wrapper(member, method, assigned=("__doc__",))


@runtime_checkable
class AsyncAckTracker(Protocol):
    """A tracker of ack chains: :class:`~xor_ack_dynamodb.drivers.AsyncTracker`'s public
    methods, with its signatures."""

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

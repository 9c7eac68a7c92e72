"""The one interface every tracker implements.

``XorAckDynamoDB``, ``MemoryAck`` and ``CombiningTracker`` satisfy :class:`AckTracker` with
identical signatures (mypy checks it below), so pipeline code can take any of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .core.algebra import EdgeLike, Mode
from .stamps import Stamp, Sum
from .stats import RequestStats
from .status import ChainStatus

__all__ = ["AckTracker"]


@runtime_checkable
class AckTracker(Protocol):
    """A tracker of ack chains. See :class:`~xor_ack_dynamodb.drivers.tracker.SyncTracker` for
    each method's guarantees and errors."""

    @property
    def mode(self) -> Mode: ...

    @property
    def stats(self) -> RequestStats: ...

    def new_edge(self) -> Stamp | int: ...

    def create(
        self, tag: str, value: EdgeLike, *, op_id: str | None = None, owner: str | None = None
    ) -> Stamp | Sum: ...

    def stamp(
        self,
        tag: str,
        value: EdgeLike | None = None,
        *,
        finished: Iterable[EdgeLike] = (),
        started: Iterable[EdgeLike] = (),
        op_id: str | None = None,
        owner: str | None = None,
    ) -> Stamp | Sum: ...

    def fail(self, tag: str, reason: str | None = None, *, owner: str | None = None) -> ChainStatus: ...

    def touch(
        self, tag: str, ttl: timedelta | float | None = None, *, owner: str | None = None
    ) -> ChainStatus: ...

    def status(self, tag: str) -> ChainStatus: ...

    def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]: ...

    def delete(self, tag: str) -> None: ...


if TYPE_CHECKING:  # mypy proves each tracker satisfies the protocol, signatures included
    from .combiner import CombiningTracker
    from .stores.dynamodb.tracker import XorAckDynamoDB
    from .stores.memory import MemoryAck

    def _conforms(a: XorAckDynamoDB, b: MemoryAck, c: CombiningTracker) -> list[AckTracker]:
        return [a, b, c]

"""What processing a record, starting a chain and firing a completion use of a pipeline.

:class:`~xor_ack_dynamodb.serverless.Pipeline` has all of it; the modules that do the work
(:mod:`.records`, :mod:`.sqs`, :mod:`.starts`) are written against this protocol, so that
the pipeline composes them and none of them imports it back.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..core.algebra import Mode
from ..interfaces import AckTracker
from ..stats import RequestStats
from .completion import CompletionGuard, Target

__all__ = ["PipelineParts"]


class PipelineParts(Protocol):
    """The tracker, the settings, the completion's guard and targets, the clients."""

    tracker: AckTracker
    mode: Mode
    queue_url: str | None
    max_receives: int
    edge_size: int
    completion_lease: float
    guard: CompletionGuard
    targets: list[Target]
    stats: RequestStats

    def client(self, service: str) -> Any:
        """The ``sqs``, ``s3`` or ``events`` client (built on first use)."""
        ...

    def now(self) -> float:
        """Epoch seconds."""
        ...

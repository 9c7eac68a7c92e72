"""What records and starts use of a pipeline: :mod:`.records`, :mod:`.sqs`
and :mod:`.starts` are written against this protocol, so that
:class:`~xor_ack_dynamodb.serverless.Pipeline` composes them and none imports it back."""

from __future__ import annotations

from typing import Any, Protocol

from ..core.algebra import Mode
from ..interfaces import AckTracker
from ..stats import RequestStats

__all__ = ["PipelineParts"]


class PipelineParts(Protocol):
    """The tracker, the settings, the clients. (Completions are not theirs: they fire
    from the table's stream, :mod:`.stream`.)"""

    tracker: AckTracker
    mode: Mode
    queue_url: str | None
    max_receives: int
    edge_size: int
    stats: RequestStats

    def client(self, service: str) -> Any: ...  # "sqs", "s3", "events": built on first use

    def now(self) -> float: ...  # epoch seconds

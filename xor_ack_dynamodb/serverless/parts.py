"""What the serverless modules use of a pipeline: :mod:`.records`, :mod:`.starts` and
:mod:`.stream` are written against this protocol, so that
:class:`~xor_ack_dynamodb.serverless.Pipeline` composes them and none imports it back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..core.algebra import Mode
from ..core.chain import Chain
from ..interfaces import AckTracker
from ..stats import RequestStats
from .completion import Completion, FireOutcome, Lineage

#: What reads an item's attributes into a :class:`Chain` (the DynamoDB tracker's
#: ``read_item``; raises :class:`~xor_ack_dynamodb.errors.CorruptItem` for an item that
#: is not a chain's).
ItemReader = Callable[[Mapping[str, Any]], Chain]


class PipelineParts(Protocol):
    """The tracker, the settings, the clients, and what fires completions."""

    tracker: AckTracker
    mode: Mode
    queue_url: str | None
    max_receives: int
    edge_size: int
    stats: RequestStats
    chains: Callable[[str, str | None], bool]  # which chains it completes, by tag and owner

    def client(self, service: str) -> Any: ...  # "sqs", "s3", "events": built on first use

    def fire_completion(self, completion: Completion, lineage: Lineage | None = None) -> FireOutcome: ...

    def item_reader(self) -> ItemReader: ...  # reads the stream's images

"""What a handler sees and does: the record's chain and body, and ``emit`` to *declare*
children (it never stamps or sends). Each child gets the next derived edge, so a handler
run again emits the same edges in the same order; if it raises, nothing emitted is
stamped or sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.algebra import Mode
from ..stamps import Position
from .edges import Edge, edge_text
from .envelope import Envelope


@dataclass(frozen=True, slots=True)
class S3Object:
    """One object of an S3 event: where it is and which upload it was."""

    bucket: str
    key: str
    etag: str = ""
    version_id: str | None = None
    sequencer: str | None = None
    size: int | None = None

    @property
    def tag(self) -> str:
        """The chain's tag: one chain per object version (versioned buckets) or per
        object content (its ETag) at that key."""
        if self.version_id:
            return f"s3://{self.bucket}/{self.key}@version:{self.version_id}"
        return f"s3://{self.bucket}/{self.key}@etag:{self.etag}"

    @property
    def identity(self) -> str:
        """The start's incarnation, the same for every delivery of this upload's event: the
        version id when the bucket is versioned, else the event's sequencer, else the ETag."""
        return self.version_id or self.sequencer or self.etag or self.key


@dataclass(frozen=True, slots=True)
class Child:
    """A child declared by a handler: its envelope (with its derived edge) and where it
    goes: an SQS message (``queue_url``, ``body``) or an S3 object (``bucket``, ``key``,
    ``data``)."""

    envelope: Envelope
    body: str = ""
    queue_url: str | None = None
    delay_seconds: int | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    group_id: str | None = None
    bucket: str | None = None
    key: str | None = None
    data: bytes = b""
    content_type: str | None = None

    @property
    def edge(self) -> Edge:
        return self.envelope.edge

    @property
    def is_object(self) -> bool:
        return self.bucket is not None


@dataclass(kw_only=True, eq=False)
class Context:
    """One unit of tracked work: a received message (``edge`` is the edge it finishes)
    or a start (``edge`` None). ``body`` is ``""`` for a start, ``record`` the raw SQS
    record, ``receive_count`` SQS's ``ApproximateReceiveCount``, ``source`` the
    :class:`S3Object` of an S3 event; the children's edges come from ``derive`` (by
    position)."""

    tag: str
    owner: str
    mode: Mode
    edge: Edge | None
    derive: Callable[[int], Edge] = field(repr=False)
    default_queue: str | None
    body: str = ""
    record: Mapping[str, Any] | None = None
    message_id: str | None = None
    receive_count: int = 1
    source: S3Object | None = None
    lambda_context: Any = None
    _children: list[Child] = field(default_factory=list, init=False, repr=False)

    @property
    def edge_id(self) -> str:
        """This record's edge as text (hex or decimal digits; ``""`` for a start): a
        stable name for its work, the same on every delivery (an output key, say)."""
        return "" if self.edge is None else edge_text(self.edge)

    @property
    def children(self) -> tuple[Child, ...]:
        """The children emitted so far, in order."""
        return tuple(self._children)

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` if it is not JSON)."""
        return json.loads(self.body)

    def _envelope(self) -> Envelope:
        return Envelope(self.tag, self.derive(len(self._children)), self.owner, self.mode)

    def emit(
        self,
        body: Any,
        *,
        queue_url: str | None = None,
        delay_seconds: int | None = None,
        attributes: Mapping[str, Any] | None = None,
        group_id: str | None = None,
    ) -> Child:
        """Declare a child message: ``body`` (a ``str``, or anything ``json.dumps``
        takes) to ``queue_url`` (default: the pipeline's queue), sent after this
        handler's stamp lands. ``attributes`` are extra SQS message attributes (at most
        9: the envelope takes SQS's tenth); ``group_id`` is a FIFO queue's
        ``MessageGroupId``. Raises ``ValueError`` with no queue to send to, ``TypeError``
        for a body that is not JSON-serializable."""
        queue = queue_url or self.default_queue
        if not queue:
            raise ValueError("emit() needs a queue_url: the pipeline has no default queue")
        extra = dict(attributes or {})
        if "xor-ack" in extra or len(extra) > 9:
            raise ValueError("attributes: at most 9, and not 'xor-ack' (the envelope's)")
        text = body if isinstance(body, str) else json.dumps(body)
        child = Child(
            envelope=self._envelope(),
            body=text,
            queue_url=queue,
            delay_seconds=delay_seconds,
            attributes=extra,
            group_id=group_id,
        )
        self._children.append(child)
        return child

    def emit_object(
        self, bucket: str, key: str, data: bytes | str, *, content_type: str | None = None
    ) -> Child:
        """Declare a child that is an S3 object: ``data`` written to ``bucket``/``key``
        with the envelope in its metadata, after this handler's stamp lands; its upload
        event (:func:`~xor_ack_dynamodb.serverless.process_s3_event`) finishes its edge.
        Raises :class:`MalformedEnvelope` for a tag too long for S3's metadata."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        child = Child(
            envelope=self._envelope(), bucket=bucket, key=key, data=payload, content_type=content_type
        )
        # Too long a tag for S3 metadata: refuse now, not after the stamp (which adds the
        # parent's position: checked at its longest).
        longest = Position(b"\xff" * 8, 2**63)
        replace(child.envelope, after=longest).s3_metadata()
        self._children.append(child)
        return child

"""Sending the children a handler declared: SQS messages ten a request, S3 objects one
a request, each with its envelope naming where the stamp that sent it landed (``after``;
on a FIFO queue its edge is also the deduplication id). Any copy of a child is harmless
(same edge, same op id, checked from ``after``): nothing here needs to know whether a
message was sent twice."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..errors import XorAckError
from ..stamps import Position
from ..stores.dynamodb.answers import checked
from .context import Child
from .edges import edge_text
from .parts import PipelineParts

#: SendMessageBatch's limit.
BATCH = 10


class ChildrenNotSent(XorAckError):
    """SQS refused some children. Their edges are in the chain already (the stamp landed
    first), so the record is retried: its stamp is then a duplicate and the children are
    sent again."""


def _entry(index: int, child: Child) -> dict[str, Any]:
    """The child's ``SendMessageBatch`` entry; its attributes the handler's extras (a
    ``str`` value a String attribute, a mapping passed as boto3 takes it) and the envelope."""
    attributes = {
        name: {"DataType": "String", "StringValue": value} if isinstance(value, str) else dict(value)
        for name, value in child.attributes.items()
    }
    entry: dict[str, Any] = {
        "Id": str(index),
        "MessageBody": child.body,
        "MessageAttributes": {**attributes, **child.envelope.sqs_attributes()},
    }
    if child.delay_seconds is not None:
        entry["DelaySeconds"] = child.delay_seconds
    assert child.queue_url is not None
    if child.queue_url.endswith(".fifo"):
        entry["MessageGroupId"] = child.group_id or child.envelope.tag[:128]
        entry["MessageDeduplicationId"] = hashlib.blake2b(
            f"{child.envelope.tag}\x00{edge_text(child.edge)}".encode(), digest_size=32
        ).hexdigest()
    return entry


def send_children(children: Iterable[Child], after: Position | None, pipeline: PipelineParts) -> None:
    """Send every child, its envelope naming ``after``, the position where the stamp that
    started it landed. Raises :class:`ChildrenNotSent` naming what SQS refused (the
    others were sent), and lets a client error propagate; either way the caller retries
    the record, which sends them all again."""
    by_queue: dict[str, list[Child]] = {}
    for child in children:
        child = replace(child, envelope=replace(child.envelope, after=after))
        if child.is_object:
            pipeline.stats.request("s3.PutObject")
            kwargs: dict[str, Any] = {
                "Bucket": child.bucket,
                "Key": child.key,
                "Body": child.data,
                "Metadata": child.envelope.s3_metadata(),
            }
            if child.content_type:
                kwargs["ContentType"] = child.content_type
            s3 = pipeline.client("s3")
            checked(s3, "PutObject", kwargs, s3.put_object(**kwargs))
        else:
            assert child.queue_url is not None
            by_queue.setdefault(child.queue_url, []).append(child)
    refused: list[Mapping[str, Any]] = []
    for queue, queued in by_queue.items():
        for start in range(0, len(queued), BATCH):
            entries = [_entry(i, c) for i, c in enumerate(queued[start : start + BATCH])]
            pipeline.stats.request("sqs.SendMessageBatch")
            sqs, request = pipeline.client("sqs"), {"QueueUrl": queue, "Entries": entries}
            response = checked(sqs, "SendMessageBatch", request, sqs.send_message_batch(**request))
            refused.extend(response.get("Failed", []))
    if refused:
        first = refused[0]
        raise ChildrenNotSent(
            f"SQS refused {len(refused)} children (first: {first.get('Code')}: {first.get('Message')})"
        )

"""Finding the chains to replay, the ones that failed or expired: by known roots' tags,
by an S3 prefix's objects, or by a Scan of the whole table (docs/lambda.md, "Finding
chains to replay")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..interfaces import AckTracker
from ..status import ChainStatus
from .context import S3Object

if TYPE_CHECKING:
    from ..stores.dynamodb.tracker import XorAckDynamoDB


@dataclass
class Unfinished:
    """Chains to replay: ``failed`` and ``expired`` (tag -> status, with the failure's
    reason), and ``missing`` tags (no chain: never started, or purged by TTL)."""

    failed: dict[str, ChainStatus] = field(default_factory=dict)
    expired: dict[str, ChainStatus] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.failed) + len(self.expired) + len(self.missing)


def unfinished(tracker: AckTracker, tags: Iterable[str]) -> Unfinished:
    """Which of ``tags`` failed, expired, or have no chain (a strongly consistent
    ``status_many``). Pending and acked chains are left out."""
    found = tracker.status_many(tags)
    out = Unfinished(missing=found.missing)
    for tag, status in found.items():
        if status.state == "failed":
            out.failed[tag] = status
        elif status.state in ("expired", "corrupt"):
            out.expired[tag] = status
    return out


def unfinished_objects(
    tracker: AckTracker, s3: Any, bucket: str, prefix: str = ""
) -> tuple[Unfinished, dict[str, S3Object]]:
    """:func:`unfinished` for the objects under ``bucket``/``prefix`` (chains
    :func:`~xor_ack_dynamodb.serverless.process_s3_event` started in an unversioned
    bucket: tags from the listing's keys and ETags), and the objects by tag."""
    objects: dict[str, S3Object] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            obj = S3Object(
                bucket=bucket,
                key=item["Key"],
                etag=str(item.get("ETag", "")).strip('"'),
                size=item.get("Size"),
            )
            objects[obj.tag] = obj
    return unfinished(tracker, objects), objects


def scan_unfinished(
    tracker: XorAckDynamoDB, *, prefix: str | None = None, page_size: int = 1000
) -> Iterator[ChainStatus]:
    """Every failed or expired chain of an ``XorAckDynamoDB``'s table (of tags starting
    with ``prefix``): its :meth:`~xor_ack_dynamodb.XorAckDynamoDB.scan_unfinished`."""
    return tracker.scan_unfinished(prefix=prefix, page_size=page_size)

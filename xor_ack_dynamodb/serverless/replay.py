"""Finding the chains to replay: the ones that failed or expired (docs/lambda.md,
"Finding chains to replay").

A chain expires without any write, so no index can list them: :func:`unfinished` asks
for known roots' tags, :func:`unfinished_objects` takes the roots from an S3 prefix, and
:func:`scan_unfinished` reads (and bills) every item of the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..interfaces import AckTracker
from ..status import ChainStatus
from ..stores.dynamodb.answers import scan_pages
from .context import S3Object

__all__ = ["Unfinished", "unfinished", "unfinished_objects", "scan_unfinished"]

#: The states a replay is for.
REPLAYABLE = ("failed", "expired")


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
    wanted = list(dict.fromkeys(tags))
    found = tracker.status_many(wanted)
    out = Unfinished()
    for tag in wanted:
        status = found.get(tag)
        if status is None:
            out.missing.append(tag)
        elif status.state == "failed":
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
    tracker: Any, *, prefix: str | None = None, page_size: int = 1000
) -> Iterator[ChainStatus]:
    """Every failed or expired chain of an ``XorAckDynamoDB``'s table (of tags starting
    with ``prefix``): a Scan filtered server-side to ``failed`` chains and pending ones
    past their deadline, then decided by the tracker's rules (the skew margin included).
    Raises :class:`~xor_ack_dynamodb.errors.BadResponse` for a page that is not
    DynamoDB's answer, never reading it as a table with nothing to replay."""
    now = tracker.driver.now()
    names = {"#st": "state", "#dl": "deadline"}
    values: dict[str, Any] = {
        ":failed": {"S": "failed"},
        ":pending": {"S": "pending"},
        ":now": {"N": str(now)},
    }
    condition = "(#st = :failed OR (#st = :pending AND #dl < :now))"
    if prefix:
        names["#pk"] = tracker.partition_key
        values[":p"] = {"S": prefix}
        condition = f"begins_with(#pk, :p) AND {condition}"
    pages = scan_pages(
        tracker.client,
        TableName=tracker.table,
        FilterExpression=condition,
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=values,
        ConsistentRead=True,
        Limit=page_size,
    )
    for page in pages:
        tracker.stats.request("Scan")
        for item in page["Items"]:
            status = tracker.rules.status(tracker.codec.parse(item), now)
            if status.state in REPLAYABLE:
                yield status

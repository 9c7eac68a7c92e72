"""The one-time migration of chain items this library wrote before lineages.

An item of the 0.1 layout (0.1.0 and earlier: ``ops`` but no ``lin``; in the first
layout the op keys were hex strings and, without ``tok``, ``expires_at`` was the
deadline) or one a pre-release of 0.2 gave a lineage with positions it has no history
of (``hb``) is refused by every call (:class:`~xor_ack_dynamodb.errors.UnmigratedItem`)
until :func:`migrate_table` (``xor-ack migrate``) has rewritten it in the current
layout, once, before the new version uses the table.

What a rewrite keeps: the value, state, deadline, owner, create op, window and the op
ids still in the item, exactly. It draws a new lineage. The ops that left the item
without a history block (0.1 dropped them) are positions whose block is missing, so a
later copy of one of them raises :class:`~xor_ack_dynamodb.errors.OutcomeUnknown` and
is never applied again: positions are moved up to the next multiple of
:data:`~xor_ack_dynamodb.core.chain.BLOCK` (no history block is written for them) and
the ops in the item follow. An item without ``tok`` (the first layout) is marked
``adp``, as a Node item is when Python first writes it: ops it dropped are unknown.
Each rewrite is a ``PutItem`` conditioned on the item being as it was read (its token,
or its stamp without one); an item that changed meanwhile is read again and rewritten.
Running it twice is harmless: a migrated item is not selected again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from ...core.chain import BLOCK, Chain, new_lineage, updated
from ...errors import CorruptItem
from .codec import error_code
from .item import Item, ItemCodec

__all__ = ["Migration", "migrate_item", "migrate_table"]

#: Items of the old layouts: op ids without a lineage, or positions without history.
OLD_LAYOUT = "(attribute_exists(#ops) AND attribute_not_exists(#lin)) OR attribute_exists(#hb)"
#: Rewrites of one item tried while other writers keep changing it.
ATTEMPTS = 5


@dataclass
class Migration:
    """What :func:`migrate_table` did: items read by the scan, items rewritten, and the
    tags it could not rewrite (changed on every attempt, or unreadable), with why."""

    scanned: int = 0
    migrated: int = 0
    failed: dict[str, str] = field(default_factory=dict)


def migrate_item(codec: ItemCodec, item: Item, now: int) -> Chain:
    """The chain an old-layout ``item`` becomes (see the module doc). Raises
    :class:`~xor_ack_dynamodb.errors.CorruptItem` for an item it cannot read."""
    current = {k: v for k, v in item.items() if k not in ("hb", "cut")}
    current["lin"] = {"B": new_lineage()}
    ops = item.get("ops", {}).get("L", [])
    current["ops"] = {"L": [{"B": bytes.fromhex(op["S"])} if "S" in op else op for op in ops]}
    if "tok" not in item and "deadline" not in item and codec.ttl_attribute in item:
        if item.get("state", {}).get("S", "pending") == "pending":
            current["deadline"] = item[codec.ttl_attribute]  # the first layout's deadline
    chain = codec.parse(current)
    dropped = max(chain.seq - len(chain.ops), chain.cut_seq)
    cut = -(-dropped // BLOCK) * BLOCK
    moved = replace(chain, cut_seq=cut, seq=cut + len(chain.ops), adopted=chain.token is None)
    return updated(moved, now)


def _condition(item: Item) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The condition that the stored item is still ``item``."""
    if "tok" in item:
        return "#tok = :tok", {"#tok": "tok"}, {":tok": item["tok"]}
    return "attribute_not_exists(#tok) AND #s = :s", {"#tok": "tok", "#s": "stamp"}, {":s": item["stamp"]}


def migrate_table(client: Any, table: str, codec: ItemCodec, now: int, page_size: int = 1000) -> Migration:
    """Rewrite every old-layout chain item of ``table`` in the current layout (a Scan of
    the whole table, filtered server-side; one conditional ``PutItem`` per item found).
    ``now`` is the epoch second the rewrites record as ``updated_at``."""
    out = Migration()
    names = codec.names("#ops", "#lin", "#hb")
    pages = client.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression=OLD_LAYOUT,
        ExpressionAttributeNames=names,
        ConsistentRead=True,
        PaginationConfig={"PageSize": page_size},
    )
    for page in pages:
        out.scanned += int(page.get("ScannedCount", 0))
        for item in page.get("Items", []):
            tag = item[codec.partition_key]["S"]
            why = _rewrite(client, table, codec, item, now)
            if why is None:
                out.migrated += 1
            else:
                out.failed[tag] = why
    return out


def _rewrite(client: Any, table: str, codec: ItemCodec, item: Item, now: int) -> str | None:
    """Rewrite one item, reading it again after a refused write; None once done (or no
    longer of an old layout), else why not."""
    for _ in range(ATTEMPTS):
        try:
            chain = migrate_item(codec, item, now)
        except (CorruptItem, ValueError, KeyError) as exc:  # unreadable: the others go on
            return repr(exc)
        condition, names, values = _condition(item)
        try:
            client.put_item(
                TableName=table,
                Item=codec.encode(chain),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
            return None
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
        key = codec.key(item[codec.partition_key]["S"])
        found = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        if found is None or "hb" not in found and ("lin" in found or "ops" not in found):
            return None  # deleted, migrated by another run, or replaced by a Node write
        item = found
    return f"changed on each of {ATTEMPTS} attempts"

"""The one-time migration of chain items this library wrote before lineages: never a
second application of an op it cannot check (it raises ``OutcomeUnknown`` instead; the
pending chains so left are in :attr:`Migration.replay`), harmless run twice (what each
layout keeps, and why: docs/cli.md, "Upgrading: ``xor-ack migrate``")."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from ...core.chain import BLOCK, OP_KEY_BYTES, UNKNOWN_DIGEST, Chain, Op, new_lineage, updated
from ...errors import CorruptItem
from .answers import checked, scan_pages
from .codec import error_code
from .item import Item, ItemCodec

#: Items that may be of an old layout: op ids without a lineage, positions without
#: history, or a lineage started over another writer's item (``adp``: a pre-release of
#: 0.2 started one over a first-layout item; :func:`needs_migration` tells them apart
#: from the current version's).
OLD_LAYOUT = (
    "(attribute_exists(#ops) AND attribute_not_exists(#lin)) OR attribute_exists(#hb) "
    "OR attribute_exists(#adp)"
)
#: Rewrites of one item tried while other writers keep changing it.
ATTEMPTS = 5
#: What a chain listed for replay answers.
UNKNOWN = "a named op id not in its window answers OutcomeUnknown"
#: Why a 0.1 chain is listed for replay.
DROPPED = f"0.1 dropped ops without history: {UNKNOWN}"


@dataclass
class Migration:
    """What :func:`migrate_table` did: items scanned and rewritten, the tags it could not
    rewrite with why, and the pending chains to replay (``replay``, see the module doc)
    with why."""

    scanned: int = 0
    migrated: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    replay: dict[str, str] = field(default_factory=dict)


def _number(item: Item, name: str) -> int:
    value = item.get(name)
    return 0 if value is None else int(value["N"])


def _key(op: Any) -> bytes:
    """An op key as 8 bytes: Binary, or the first layout's hex String. Raises
    :class:`~xor_ack_dynamodb.errors.CorruptItem` for anything else."""
    if isinstance(op, dict) and "B" in op and len(op["B"]) == OP_KEY_BYTES:
        return bytes(op["B"])
    if isinstance(op, dict) and isinstance(op.get("S"), str) and len(op["S"]) == 2 * OP_KEY_BYTES:
        try:
            return bytes.fromhex(op["S"])
        except ValueError:
            pass
    raise CorruptItem(f"chain item's 'ops' holds a malformed op key: {op!r}")


def _ops(item: Item) -> list[Any]:
    ops = item.get("ops", {"L": []})
    if not isinstance(ops, dict) or not isinstance(ops.get("L"), list):
        raise CorruptItem("chain item's 'ops' is not a List")
    return list(ops["L"])


def unreadable(item: Item) -> str | None:
    """Why the op history of the old-layout ``item`` cannot be read exactly (docs/cli.md,
    "Upgrading"), or None when it can. Raises
    :class:`~xor_ack_dynamodb.errors.CorruptItem`, ``ValueError``, ``KeyError`` or
    ``TypeError`` for an item it cannot read."""
    ops = _ops(item)
    if any(isinstance(op, dict) and "S" in op for op in ops) or "seq" not in item or "tok" not in item:
        return "written by the first layout (op keys without their namespace, no positions)"
    if _number(item, "cutn") + len(ops) > _number(item, "seq"):
        return "holds first-layout ops a later version carried on (more ops than positions)"
    return None


def needs_migration(item: Item) -> bool:
    """Whether ``item`` is of an old layout (a history item, a Node item or a current
    one is not). Raises :class:`~xor_ack_dynamodb.errors.CorruptItem`, ``ValueError``,
    ``KeyError`` or ``TypeError`` for an ``adp`` item it cannot read."""
    if "hb" in item or "ops" in item and "lin" not in item:
        return True
    return "adp" in item and "ops" in item and unreadable(item) is not None


def migrate_item(codec: ItemCodec, item: Item, now: int) -> Chain:
    """The chain an old-layout ``item`` becomes (what it keeps per layout: docs/cli.md,
    "Upgrading"). Raises :class:`~xor_ack_dynamodb.errors.CorruptItem` (or
    ``ValueError``, ``KeyError``, ``TypeError``) for an item it cannot read."""
    why = unreadable(item)
    keys = [_key(op) for op in _ops(item)]
    hashes = item.get("oph", {}).get("L")
    if hashes is not None and len(hashes) != len(keys):
        raise CorruptItem("chain item's 'oph' does not match its 'ops'")
    seq, cut = _number(item, "seq"), _number(item, "cutn")
    # Exactly: every op in the list, positions up to what 0.1 dropped without history.
    # Else only the newest ops, those a later version appended (at most seq of them).
    kept = len(keys) if why is None else min(len(keys), seq)
    first = len(keys) - kept
    dropped = max(seq - len(keys), cut) if why is None else 1
    current = {k: v for k, v in item.items() if k not in ("hb", "cut", "cutn", "seq", "ops", "oph", "adp")}
    current["lin"] = {"B": new_lineage()}
    current["ops"] = {"L": [{"B": k} for k in keys[first:]]}
    if hashes is not None:
        current["oph"] = {"L": hashes[first:]}
    if "tok" not in item and "deadline" not in item and codec.ttl_attribute in item:
        if item.get("state", {}).get("S", "pending") == "pending":
            current["deadline"] = item[codec.ttl_attribute]  # the first layout's deadline
    chain = codec.parse(current)
    create_op = chain.create_op
    if why is not None and first > 0:
        create_op = Op(keys[0], UNKNOWN_DIGEST)  # the oldest first-layout op: the create's, if kept
    padded = -(-dropped // BLOCK) * BLOCK
    moved = replace(chain, cut_seq=padded, seq=padded + kept, adopted=why is not None, create_op=create_op)
    return updated(moved, now)


def _condition(item: Item) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The condition that the stored item is still ``item``."""
    if "tok" in item:
        return "#tok = :tok", {"#tok": "tok"}, {":tok": item["tok"]}
    return "attribute_not_exists(#tok) AND #s = :s", {"#tok": "tok", "#s": "stamp"}, {":s": item["stamp"]}


def migrate_table(client: Any, table: str, codec: ItemCodec, now: int, page_size: int = 1000) -> Migration:
    """Rewrite every old-layout chain item of ``table`` (one Scan, one conditional
    ``PutItem`` per item found, dated ``now``). An item it cannot rewrite is in
    ``failed``, the others go on; an error of the scan or a request error other than a
    refused condition propagates."""
    out = Migration()
    names = codec.names("#ops", "#lin", "#hb", "#adp")
    pages = scan_pages(
        client,
        TableName=table,
        FilterExpression=OLD_LAYOUT,
        ExpressionAttributeNames=names,
        ConsistentRead=True,
        Limit=page_size,
    )
    for page in pages:
        out.scanned += page["ScannedCount"]
        for item in page["Items"]:
            tag = item[codec.partition_key]["S"]
            try:
                if not needs_migration(item):
                    continue  # a lineage the current version started over a Node item
            except (CorruptItem, ValueError, KeyError, TypeError) as exc:
                out.failed[tag] = repr(exc)
                continue
            done = _rewrite(client, table, codec, item, now)
            if isinstance(done, str):
                out.failed[tag] = done
            elif done is not None:
                chain, why = done
                out.migrated += 1
                if chain.state == "pending" and chain.cut_seq > 0:
                    out.replay[tag] = DROPPED if why is None else f"{why}: {UNKNOWN}"
    return out


def _rewrite(
    client: Any, table: str, codec: ItemCodec, item: Item, now: int
) -> tuple[Chain, str | None] | str | None:
    """Rewrite one item, reading it again after a refused write: the chain written and
    why its history is not read exactly (None: it is); None when there was nothing left
    to do (deleted, migrated by another run, replaced by a Node write); else why not."""
    for _ in range(ATTEMPTS):
        try:
            why = unreadable(item)
            chain = migrate_item(codec, item, now)
        except (CorruptItem, ValueError, KeyError, TypeError) as exc:  # unreadable: the others go on
            return repr(exc)
        condition, names, values = _condition(item)
        request = {
            "TableName": table,
            "Item": codec.encode(chain),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnConsumedCapacity": "TOTAL",
        }
        try:
            checked(client, "PutItem", request, client.put_item(**request))
            return chain, why
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
        key = codec.key(item[codec.partition_key]["S"])
        read = {"TableName": table, "Key": key, "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"}
        found = checked(client, "GetItem", read, client.get_item(**read)).get("Item")
        try:
            if found is None or not needs_migration(found):
                return None
        except (CorruptItem, ValueError, KeyError, TypeError) as exc:
            return repr(exc)
        item = found
    return f"changed on each of {ATTEMPTS} attempts"

"""The write-unit budget that bounds a history block's size (issue 18): with one writer, a
sum chain's item stays under 1 KB, one write unit a stamp, through its largest item
(``max_ops`` + a block of op ids, just before the block moves) and the move itself, even
under the long tag an S3 object's chain has in the serverless layer.

This is what a bigger block would break: the item keeps 14 bytes an op id (an 8-byte key
and a 4-byte payload hash, each a list element), so 8 more op ids at the peak take this
tag's item from 955 to 1,067 bytes, two write units for every stamp past 1 KB.
Measured on DynamoDB Local, which computes write units from item sizes as AWS does.
"""

from __future__ import annotations

from typing import Any

from conftest import unique_table

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.core.chain import BLOCK
from xor_ack_dynamodb.serverless.context import S3Object

#: The documented default window (``max_ops``).
WINDOW = 8


def test_one_writer_spends_one_write_unit_a_stamp_through_its_largest_item(ddblocal_client: Any) -> None:
    tag = S3Object(
        "ingest-bucket-eu-west-1",
        "uploads/2026/11/26/customer-0042/orders/part-00001-of-00064.csv.gz",
        etag="d41d8cd98f00b204e9800998ecf8427e",
    ).tag
    assert len(tag.encode()) == 133  # an S3 object's chain: bucket, key and ETag
    ack = XorAckDynamoDB(unique_table(), partition_key="tagID", mode="sum", client=ddblocal_client)
    ack.create_table()
    units: list[tuple[str, float]] = []

    def meter(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if http_response.status_code < 300 and model.name in ("PutItem", "UpdateItem"):
            units.append((model.name, float((parsed.get("ConsumedCapacity") or {}).get("CapacityUnits", 0))))

    ddblocal_client.meta.events.register("after-call.dynamodb", meter)
    try:
        stamps = WINDOW + BLOCK + 4  # past the largest item, its move and a few stamps after
        root = ack.new_edge()
        children = [ack.new_edge() for _ in range(stamps)]
        ack.create(tag, root)
        ack.stamp(tag, finished=[root], started=children)
        for i, child in enumerate(children):
            ack.stamp(tag, finished=[child], op_id=f"child-{i}")
    finally:
        ddblocal_client.meta.events.unregister("after-call.dynamodb", meter)
    assert ack.status(tag).state == "acked"
    assert ack.stats.events["history_writes"] == 1 and ack.stats.events["trims"] == 1  # a block moved
    assert len(units) == 2 + stamps + 3  # create, fan-out, the ADDs, history put, trim, completion
    assert [name for name, cost in units if cost != 1.0] == [], units

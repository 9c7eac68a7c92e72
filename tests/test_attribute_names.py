"""A configured attribute name (the partition key, the TTL attribute) that is also an
attribute the library writes on a chain's item (the chain's own, or the serverless
completion's claim) is refused with ``InvalidConfig`` when the tracker is built, before
any request: the chain's or the claim's writes would otherwise overwrite the key or the
expiry, or be refused by DynamoDB only when they are made."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig

#: A chain attribute and each of the claim's (stores/dynamodb/claims.py).
TAKEN = ["state", "tok", "cmpl", "cmpl_by", "cmpl_until", "cmpl_at"]


@pytest.mark.parametrize("name", TAKEN)
@pytest.mark.parametrize("which", ["partition_key", "ttl_attribute"])
def test_a_name_the_library_writes_is_refused_before_any_request(which: str, name: str) -> None:
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    with Stubber(client) as stubber:  # no responses queued: any request would raise
        with pytest.raises(InvalidConfig, match=f"{which} {name!r} collides"):
            XorAckDynamoDB("acks", client=client, **{which: name})
        stubber.assert_no_pending_responses()


def test_names_beside_them_are_accepted() -> None:
    ack = XorAckDynamoDB("acks", partition_key="cmpl_tag", ttl_attribute="cmpl_expires", region="us-east-1")
    assert ack.partition_key == "cmpl_tag"

"""The envelope on every carrier, its typed errors, and the derived edges (no AWS)."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from xor_ack_dynamodb.serverless import (
    Envelope,
    EnvelopeError,
    EnvelopeModeMismatch,
    MalformedEnvelope,
    MissingEnvelope,
    UnsupportedEnvelopeVersion,
)
from xor_ack_dynamodb.serverless.edges import child_edge, op_id, owner_for, start_edge
from xor_ack_dynamodb.serverless.envelope import decode_record, decode_s3_metadata, from_json
from xor_ack_dynamodb.stamps import Position

XOR = Envelope("s3://in/a.jsonl@etag:1f", bytes.fromhex("00ff" * 8), "inc-1", "xor")
SUM = Envelope("orders/2024-06-01", 2**63 + 5, "inc-2", "sum")
#: With where its stamp checks for earlier copies from: its parent's position.
FULL = Envelope("orders/2024-06-02", 7, "inc-3", "sum", after=Position(b"\x01" * 8, 41))


def sqs_record(body: str, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"messageId": "m-1", "body": body, "messageAttributes": attributes or {}, "attributes": {}}


@pytest.mark.parametrize("env", [XOR, SUM, FULL], ids=["xor", "sum", "copy"])
def test_every_carrier_round_trips(env: Envelope) -> None:
    lambda_attrs = {"xor-ack": {"stringValue": env.to_json(), "dataType": "String"}}
    boto_record = {"MessageId": "m", "Body": "payload", "MessageAttributes": env.sqs_attributes()}
    body_form = json.dumps(env.body_form({"n": 1}))
    sns_attr = json.dumps(
        {
            "Type": "Notification",
            "Message": "payload",
            "MessageAttributes": {"xor-ack": {"Type": "String", "Value": env.to_json()}},
        }
    )
    sns_body = json.dumps({"Type": "Notification", "Message": json.dumps(env.body_form("payload"))})
    eventbridge = json.dumps({"detail-type": "work", "source": "me", "detail": env.body_form({"n": 1})})
    cases = [
        (sqs_record("payload", lambda_attrs), "payload"),
        (boto_record, "payload"),
        (sqs_record(body_form), '{"n": 1}'),
        (sqs_record(sns_attr), "payload"),
        (sqs_record(sns_body), "payload"),
        (sqs_record(eventbridge), '{"n": 1}'),
    ]
    for record, body in cases:
        message = decode_record(record, env.mode)
        assert message.envelope == env and message.body == body
    assert decode_s3_metadata(env.s3_metadata(), env.mode) == env
    assert decode_s3_metadata({}, env.mode) is None
    assert pickle.loads(pickle.dumps(env)) == env


def attr(value: str) -> dict[str, Any]:
    return {"xor-ack": {"stringValue": value, "dataType": "String"}}


def good(**changes: Any) -> str:
    data = {**SUM.to_dict(), **changes}
    return json.dumps({k: v for k, v in data.items() if v is not None})


@pytest.mark.parametrize(
    ("record", "error"),
    [
        (sqs_record("plain text, no envelope"), MissingEnvelope),
        (sqs_record('{"order": 1}'), MissingEnvelope),
        (sqs_record('{"Type": "Notification", "Message": "x"}'), MissingEnvelope),
        (sqs_record("x", attr("{not json")), MalformedEnvelope),
        (sqs_record("x", attr("[1, 2]")), MalformedEnvelope),
        (sqs_record("x", attr(good(v=2))), UnsupportedEnvelopeVersion),
        (sqs_record("x", attr(good(v="1"))), MalformedEnvelope),
        (sqs_record("x", attr(good(tag=""))), MalformedEnvelope),
        (sqs_record("x", attr(good(tag=7))), MalformedEnvelope),
        (sqs_record("x", attr(good(edge="-5"))), MalformedEnvelope),
        (sqs_record("x", attr(good(edge="0"))), MalformedEnvelope),
        (sqs_record("x", attr(good(edge=str(2**64)))), MalformedEnvelope),
        (sqs_record("x", attr(good(owner=None))), MalformedEnvelope),
        (sqs_record("x", attr(good(mode="product"))), MalformedEnvelope),
        (sqs_record("x", attr(good(after="0101:1"))), MalformedEnvelope),
        (sqs_record("x", attr(good(after=41))), MalformedEnvelope),
        (sqs_record("x", attr(XOR.to_json())), EnvelopeModeMismatch),
        (sqs_record("x", {"xor-ack": {"dataType": "Binary", "binaryValue": "AA=="}}), MalformedEnvelope),
        (sqs_record(json.dumps({"xor-ack": {"v": 1}, "body": 1})), MalformedEnvelope),
        ({"messageId": "m", "messageAttributes": attr(SUM.to_json())}, MalformedEnvelope),
    ],
)
def test_bad_envelopes_are_typed_errors(record: dict[str, Any], error: type[EnvelopeError]) -> None:
    with pytest.raises(error) as info:
        decode_record(record, "sum")
    assert type(info.value) is error and isinstance(info.value, ValueError)


def test_xor_edges_are_checked() -> None:
    for edge in ("zz", "00" * 16, "ab" * 65):
        with pytest.raises(MalformedEnvelope):
            decode_record(sqs_record("x", attr(json.dumps({**XOR.to_dict(), "edge": edge}))), "xor")


def test_a_tag_too_long_for_s3_metadata_is_refused() -> None:
    with pytest.raises(MalformedEnvelope, match="2048"):
        Envelope("t" * 2000, 5, "o", "sum").s3_metadata()


def test_edges_are_derived_deterministically() -> None:
    for parent in (XOR.edge, 12345):
        kids = [child_edge(parent, i) for i in range(50)]
        assert kids == [child_edge(parent, i) for i in range(50)]  # a retry derives the same
        assert len(set(kids)) == 50 and parent not in kids
        assert all(isinstance(k, bytes if isinstance(parent, bytes) else int) for k in kids)
    sums = [start_edge("sum", "t", "inc", i) for i in range(200)]
    assert all(isinstance(e, int) and 1 <= e < 2**63 for e in sums) and len(set(sums)) == 200
    assert start_edge("sum", "t", "inc", 0) != start_edge("sum", "t", "other", 0)
    assert start_edge("xor", "t", "inc", 3, 16) == start_edge("xor", "t", "inc", 3, 16)
    assert len(start_edge("xor", "t", "inc", 3, 8)) == 8  # type: ignore[arg-type]
    assert op_id(7) == "edge:7" and op_id(b"\x01\x02") == "edge:0102"
    assert owner_for("t", "a") == owner_for("t", "a") != owner_for("t", "b")


def test_fields_of_earlier_writers_are_ignored() -> None:
    """``parent`` and ``rs``, which earlier writers of version 1 added, are ignored (a
    reader of version 1 ignores fields it does not know); an envelope without ``after``
    is checked from the chain's start."""
    at = Position(b"\x02" * 8, 9)
    earlier = {"v": 1, "tag": "t", "mode": "sum", "edge": "5", "owner": "inc-1", "parent": "edge:3", "rs": 1}
    assert from_json(json.dumps({**earlier, "after": str(at)})) == Envelope("t", 5, "inc-1", "sum", after=at)
    older = from_json(json.dumps({"v": 1, "tag": "t", "mode": "sum", "edge": "5", "owner": "inc-1"}))
    assert older.after is None

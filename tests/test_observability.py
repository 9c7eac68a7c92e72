"""What a tracker tells about itself: consumed capacity, counters, and its debug log."""

from __future__ import annotations

import logging

import pytest

from xor_ack_dynamodb import XorAckDynamoDB, new_stamp


def test_consumed_capacity_is_accumulated(ack: XorAckDynamoDB) -> None:
    edge = new_stamp()
    ack.create("cap", edge)
    after_create = ack.stats.capacity_units
    ack.status_many(["cap", "missing"])
    after_batch = ack.stats.capacity_units
    ack.stamp("cap", edge)
    after_stamp = ack.stats.capacity_units
    # Every backend here reports ConsumedCapacity for each kind of request we send.
    assert 0.0 < after_create < after_batch < after_stamp
    assert isinstance(after_stamp, float)
    ack.stats.reset()
    assert ack.stats.capacity_units == 0.0


def test_debug_log_names_requests_never_secrets_or_bodies(
    ack: XorAckDynamoDB, caplog: pytest.LogCaptureFixture
) -> None:
    edge = new_stamp()
    with caplog.at_level(logging.DEBUG, logger="xor_ack_dynamodb"):
        ack.create("logged", edge)
        ack.stamp("logged", edge, op_id="secret-op-id")
    records = [r for r in caplog.records if r.name == "xor_ack_dynamodb"]
    text = "\n".join(r.getMessage() for r in records)
    # One line per request (docs/README.md: "operation, table, tag"): create and the
    # cached stamp are one PutItem each.
    requests = [r.getMessage() for r in records if r.getMessage().startswith("PutItem")]
    assert len(requests) == 2, text
    assert all(ack.table in line and "'logged'" in line for line in requests), text
    for secret in ("testing", edge.hex(), "secret-op-id", repr(bytes(edge))):
        assert secret not in text

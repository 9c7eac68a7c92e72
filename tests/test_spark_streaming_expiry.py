"""Issue 18: a streaming root whose chain expires between the batch's "expired?" read
and its create is refused and replayable, never overwritten (``create(...,
replace_expired=False)``, decided in the create's own condition). On a real Spark
(local), small."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, unique_table
from spark_helpers import order_tracking, run_order_stream

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB

pytestmark = pytest.mark.spark


class ExpiresAfterTheCheck:
    """A tracker whose chains time out right after the first ``status_many`` once
    :attr:`armed` (between the batch's read of expired chains and its creates)."""

    def __init__(self, tracker: XorAckDynamoDB, clock: Clock) -> None:
        self.tracker, self.clock, self.armed = tracker, clock, False

    def status_many(self, tags: Any) -> Any:
        found = self.tracker.status_many(tags)
        if self.armed:
            self.armed = False
            self.clock.advance(120)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tracker, name)


def test_a_root_that_expires_after_the_check_is_refused_not_overwritten(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path
) -> None:
    """o1 opens in batch 0 (60 s ttl). Batch 1 brings its closing row; its chain times
    out after batch 1 read which chains had expired and before the create. Before: the
    create overwrote the expired chain, o1 was acked as a new chain and not replayable.
    Now the create keeps it: refused, and listed for replay."""
    config: AckConfig = moto_server.config(unique_table("stream-expiry"))
    XorAckDynamoDB.from_config(config).create_table()
    now = Clock()
    client = XorAckDynamoDB.from_config(config).client
    tracker = ExpiresAfterTheCheck(XorAckDynamoDB(config.table, client=client, ttl=60, clock=now), now)

    versions: list[int] = []

    def arm_after_batch_0(batch_id: int, phase: str) -> None:
        if (batch_id, phase) == (0, "stamped"):
            versions.append(tracker.status(tracking.tag("o1")).version)
            tracker.armed = True

    files = [['{"order": "o1", "last": false}'], ['{"order": "o1", "last": true}']]
    tracking = order_tracking(config, tmp_path, stream_id="racing", tracker=tracker, hook=arm_after_batch_0)
    run_order_stream(spark, tmp_path, files, tracking)
    reports = tracking.reports()
    assert [(r.pending, r.acked) for r in reports] == [(["o1"], []), ([], [])]
    assert list(reports[1].refused) == ["o1"] and "ended" in reports[1].refused["o1"]
    status = tracker.status(tracking.tag("o1"))
    assert (status.state, [status.version]) == ("expired", versions)  # nothing written since batch 0
    assert [(a.note, a.state) for a in tracking.replayable()] == [("o1", "expired")]


def test_a_purged_chains_key_starts_a_new_chain(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path
) -> None:
    """docs/spark.md ("Structured Streaming"): once a finished chain is purged (here its
    item is deleted, as DynamoDB's TTL deletes it after the retention), a later row of
    its key starts a new chain, which its batch acks; nothing is refused."""
    config: AckConfig = moto_server.config(unique_table("stream-purged"))
    XorAckDynamoDB.from_config(config).create_table()
    tracker = XorAckDynamoDB.from_config(config)

    def purge_after_batch_0(batch_id: int, phase: str) -> None:
        if (batch_id, phase) == (0, "stamped"):
            assert tracker.status(tracking.tag("o1")).state == "acked"
            tracker.delete(tracking.tag("o1"))

    files = [['{"order": "o1", "last": true}']] * 2
    tracking = order_tracking(config, tmp_path, stream_id="purged", tracker=tracker, hook=purge_after_batch_0)
    run_order_stream(spark, tmp_path, files, tracking)
    reports = tracking.reports()
    assert [(r.acked, dict(r.refused)) for r in reports] == [(["o1"], {}), (["o1"], {})]
    status = tracker.status(tracking.tag("o1"))
    assert (status.state, status.version) == ("acked", 2)  # a new chain: one create, one stamp
    assert tracking.replayable() == []

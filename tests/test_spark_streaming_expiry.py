"""Issue 18: a streaming root whose chain expires between the batch's "expired?" read
and its create is refused and replayable, never overwritten (``create(...,
replace_expired=False)``, decided in the create's own condition). On a real Spark
(local), small."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, unique_table

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.spark import StreamTracking

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
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    landed = time.time() - 100
    for i, text in enumerate(['{"order": "o1", "last": false}', '{"order": "o1", "last": true}']):
        temp = tmp_path / f".b{i}.json"
        temp.write_text(text + "\n")
        os.utime(temp, (landed + i, landed + i))
        temp.replace(inbox / f"b{i}.json")
    now = Clock()
    client = XorAckDynamoDB.from_config(config).client
    tracker = ExpiresAfterTheCheck(XorAckDynamoDB(config.table, client=client, ttl=60, clock=now), now)

    versions: list[int] = []

    def arm_after_batch_0(batch_id: int, phase: str) -> None:
        if (batch_id, phase) == (0, "stamped"):
            versions.append(tracker.status(tracking.tag("o1")).version)
            tracker.armed = True

    tracking = StreamTracking(
        config,
        lambda frame, batch_id: frame.select("order"),
        stream_id="racing",
        location=out,
        key="order",
        closes="last",
        tracker=tracker,  # type: ignore[arg-type]
        hook=arm_after_batch_0,
    )
    stream = (
        spark.readStream.schema("order string, last boolean").option("maxFilesPerTrigger", 1).json(str(inbox))
    )
    query = (
        stream.writeStream.foreachBatch(tracking)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
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
    inbox, out = tmp_path / "inbox", tmp_path / "out"
    inbox.mkdir()
    landed = time.time() - 100
    for i in range(2):
        temp = tmp_path / f".b{i}.json"
        temp.write_text('{"order": "o1", "last": true}\n')
        os.utime(temp, (landed + i, landed + i))
        temp.replace(inbox / f"b{i}.json")
    tracker = XorAckDynamoDB.from_config(config)

    def purge_after_batch_0(batch_id: int, phase: str) -> None:
        if (batch_id, phase) == (0, "stamped"):
            assert tracker.status(tracking.tag("o1")).state == "acked"
            tracker.delete(tracking.tag("o1"))

    tracking = StreamTracking(
        config,
        lambda frame, batch_id: frame.select("order"),
        stream_id="purged",
        location=out,
        key="order",
        closes="last",
        tracker=tracker,
        hook=purge_after_batch_0,
    )
    stream = (
        spark.readStream.schema("order string, last boolean").option("maxFilesPerTrigger", 1).json(str(inbox))
    )
    query = (
        stream.writeStream.foreachBatch(tracking)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    reports = tracking.reports()
    assert [(r.acked, dict(r.refused)) for r in reports] == [(["o1"], {}), (["o1"], {})]
    status = tracker.status(tracking.tag("o1"))
    assert (status.state, status.version) == ("acked", 2)  # a new chain: one create, one stamp
    assert tracking.replayable() == []

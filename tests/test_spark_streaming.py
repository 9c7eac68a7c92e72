"""Tracked Structured Streaming (``foreachBatch``) on a real Spark: files landing in a
directory, micro-batches that fail (in the sink's tasks, and after their stamps) and a
query restarted from its checkpoint; every file is acked exactly once and the output
holds every line exactly once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, unique_table
from spark_helpers import land, order_tracking, remote_session, run_order_stream

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.spark import BatchReport, StreamTracking, TrackedFrame

pytestmark = pytest.mark.spark


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("stream"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def _files(count: int, start: int = 0) -> dict[str, list[str]]:
    return {
        f"f{i}.txt": [f"line {j} of file {i}" for j in range(i % 3 + 1)] for i in range(start, start + count)
    }


def _query(spark: Any, inbox: Path, checkpoint: Path, tracking: StreamTracking) -> Any:
    from pyspark.sql import functions as F

    lines = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", 2)
        .load(str(inbox))
        .select("value", F.col("_metadata.file_path").alias("path"))
    )
    writer = (
        lines.writeStream.foreachBatch(tracking)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    return writer.start()  # under Spark Connect, started once: see the fixture remote


def _requests(report: Any) -> dict[str, int]:
    """A batch report's DynamoDB requests by operation."""
    prefix = "requests."
    return {k[len(prefix) :]: v for k, v in sorted(report.counts.items()) if k.startswith(prefix)}


def _job(frame: TrackedFrame, batch_id: int) -> TrackedFrame:
    return frame.select("path", "value")


def _failing_job(frame: TrackedFrame, batch_id: int) -> TrackedFrame:
    """Every write task raises, on every attempt (Spark gives up on the write)."""
    from pyspark.sql import functions as F

    failing = F.when(F.col("value").isNotNull(), F.raise_error(F.lit("injected sink failure")))
    return frame.select("path", F.coalesce(failing.cast("string"), F.col("value")).alias("value"))


class FailOnce:
    """A batch hook that fails ``batch`` at ``phase`` the first time only."""

    def __init__(self, batch: int, phase: str) -> None:
        self.batch, self.phase, self.fired = batch, phase, 0

    def __call__(self, batch_id: int, phase: str) -> None:
        if (batch_id, phase) == (self.batch, self.phase) and not self.fired:
            self.fired += 1
            raise RuntimeError(f"injected failure of batch {batch_id} at {phase}")


def test_failed_batches_rerun_from_the_checkpoint_ack_every_file_once(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    inbox, checkpoint, out = tmp_path / "inbox", tmp_path / "checkpoint", tmp_path / "out"
    inbox.mkdir()
    files = _files(4)
    clock = time.time() - 100
    for i, (name, lines) in enumerate(files.items()):
        land(inbox, name, lines, clock + i)

    def tracking(**options: Any) -> StreamTracking:
        return StreamTracking(config, _job, stream_id="files", location=out, key="path", **options)

    started = time.perf_counter()
    # Run 1: batch 0's write tasks fail on every attempt: Spark aborts the write (its
    # commit protocol leaves nothing committed), nothing is stamped, the query dies.
    first = StreamTracking(config, _failing_job, stream_id="files", location=out, key="path")
    with pytest.raises(StreamingQueryException, match="injected sink failure"):
        _query(spark, inbox, checkpoint, first).awaitTermination()
    assert not list((out / "batch-00000000").glob("part-*"))
    assert not list((out / "batch-00000000" / "_xor_ack").glob("*.json")), "no ledger: nothing committed"
    assert first.reports() == []

    # Run 2, from the checkpoint: batch 0 again (same op ids: the creates are duplicates),
    # then batch 1, which fails after its stamps landed (before Spark's commit).
    second = tracking(hook=FailOnce(1, "stamped"))
    with pytest.raises(StreamingQueryException, match="injected failure of batch 1"):
        _query(spark, inbox, checkpoint, second).awaitTermination()

    # Two more files land; run 3 re-runs batch 1 (stamps recognised as applied) and
    # processes batch 2.
    more = _files(2, start=4)
    for i, (name, lines) in enumerate(more.items()):
        land(inbox, name, lines, time.time() + i)
    files.update(more)
    third = tracking()
    _query(spark, inbox, checkpoint, third).awaitTermination()
    elapsed = time.perf_counter() - started

    reports = third.reports()
    assert [r.batch_id for r in reports] == [0, 1, 2]
    # docs/spark.md, "Requests" (two files a batch): batch 0 re-run before any stamp had
    # landed (its creates recognised as applied), batch 1 re-run after its stamps had
    # (found applied by a read), batch 2 a first run (a create and a stamp per file).
    assert [_requests(r) for r in reports] == [
        {"BatchGetItem": 2, "PutItem": 4},
        {"BatchGetItem": 2, "GetItem": 2, "PutItem": 2},
        {"BatchGetItem": 2, "PutItem": 4},
    ]
    acked = [Path(k).name for r in reports for k in r.acked]
    assert sorted(acked) == sorted(files)  # every file acked, in exactly one batch
    assert all(not r.failed and not r.refused and not r.pending for r in reports)
    assert third.replayable() == []

    tracker = XorAckDynamoDB.from_config(config)
    statuses = tracker.status_many(third.tag(k) for r in reports for k in r.acked)
    assert len(statuses) == len(files)
    # One create and one stamp per file, whatever was re-run: re-sent ops were duplicates.
    assert {(s.state, s.version, s.owner) for s in statuses.values()} == {("acked", 2, "stream/files")}

    # Exact output: every line of every file once, although batch 0 was written twice
    # (the failed write's parts replaced) and batch 1's write ran twice.
    rows = spark.read.parquet(str(out / "batch-*")).collect()
    written = Counter((Path(r["path"]).name, r["value"]) for r in rows)
    expected = Counter((name, line) for name, lines in files.items() for line in lines)
    assert written == expected
    assert third.acked_rows(spark).count() == sum(expected.values())
    print(f"\nstreaming: 3 query runs, {len(files)} files, {elapsed:.1f} s")
    for report in reports:
        print(f"batch {report.batch_id}: {report.counts}")


def test_a_root_spans_batches_until_a_row_closes_it(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    """Rows keyed by an order id arrive over several batches; a row with ``last`` closes
    its order. Its chain is created on first sight, stays pending, is continued by the
    next batch and acked by the closing one; a root whose job fails is replayable."""
    from pyspark.sql import functions as F

    batches = [
        [("o1", "a", False), ("o2", "b", False), ("o3", "bad", True)],
        [("o1", "c", False), ("o2", "d", True)],
        [("o1", "e", True)],
    ]

    def job(frame: TrackedFrame, batch_id: int) -> TrackedFrame:
        return frame.fail_when(F.col("item") == "bad", "bad item").select("order", "item")

    tracking = StreamTracking(
        config, job, stream_id="orders", location=tmp_path / "out", key="order", closes="last"
    )
    files = [
        [f'{{"order": "{o}", "item": "{x}", "last": {str(last).lower()}}}' for o, x, last in rows]
        for rows in batches
    ]
    run_order_stream(spark, tmp_path, files, tracking, schema="order string, item string, last boolean")
    reports = tracking.reports()
    summary = [(r.acked, r.pending, sorted(r.failed)) for r in reports]
    assert summary == [
        ([], ["o1", "o2"], ["o3"]),
        (["o2"], ["o1"], []),
        (["o1"], [], []),
    ]
    # docs/spark.md, "Requests": a root opened in a batch costs a create and the sink's
    # stamp (o3: a fail instead); a continued one three writes and no read (a create
    # refused with TagExists, which returns the chain; the start that carries it; the
    # sink's stamp); two BatchGetItem per batch.
    assert [_requests(r) for r in reports] == [
        {"BatchGetItem": 2, "PutItem": 5, "UpdateItem": 1},
        {"BatchGetItem": 2, "PutItem": 6},
        {"BatchGetItem": 2, "PutItem": 3},
    ]
    statuses = XorAckDynamoDB.from_config(config).status_many([tracking.tag("o1"), tracking.tag("o2")])
    # o1: a create, then per batch a start and a sink stamp (the last start finishes the carry).
    assert [statuses[tracking.tag(k)].version for k in ("o1", "o2")] == [6, 4]
    assert [(a.note, a.state) for a in tracking.replayable()] == [("o3", "failed")]
    assert sorted((r["order"], r["item"]) for r in tracking.acked_rows(spark).collect()) == [
        ("o1", "a"),
        ("o1", "c"),
        ("o1", "e"),
        ("o2", "b"),
        ("o2", "d"),
    ]


def test_an_open_root_whose_chain_expired_is_refused_and_replayable(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """Chains with a 60 s ttl on a tracker whose clock jumps 120 s after batch 0, so o1
    (open in batch 0) has expired when batch 1 brings its closing row: the chain is not
    revived (a create would overwrite an expired chain), the key is refused and listed
    for replay."""
    now = Clock()
    client = XorAckDynamoDB.from_config(config).client
    tracker = XorAckDynamoDB(config.table, client=client, ttl=60, clock=now)

    def wait_after_batch_0(batch_id: int, phase: str) -> None:
        if (batch_id, phase) == (0, "stamped"):
            now.advance(120)

    files = [['{"order": "o1", "last": false}'], ['{"order": "o1", "last": true}']]
    tracking = order_tracking(
        config, tmp_path, stream_id="expiring", tracker=tracker, hook=wait_after_batch_0
    )
    run_order_stream(spark, tmp_path, files, tracking)
    reports = tracking.reports()
    assert [(r.pending, r.acked, r.refused) for r in reports] == [
        (["o1"], [], {}),
        ([], [], {"o1": "the chain of this key already ended (expired)"}),
    ]
    status = tracker.status(tracking.tag("o1"))
    assert (status.state, status.version) == ("expired", 2)  # create + batch 0's stamp, nothing since
    assert [(a.note, a.state) for a in tracking.replayable()] == [("o1", "expired")]


def test_a_batch_with_unkeyed_rows_is_refused_before_any_request(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """The batch function called directly on a plain DataFrame (what foreachBatch does):
    a row without a key raises before any request; a job that returns something other
    than a TrackedFrame raises before anything is written."""
    tracker = XorAckDynamoDB.from_config(config)
    tracking = StreamTracking(
        config, _job, stream_id="bad", location=tmp_path / "out", key="path", tracker=tracker
    )
    rows = spark.createDataFrame([("a", "x"), (None, "y")], "path string, value string")
    with pytest.raises(InvalidConfig, match="without a key"):
        tracking(rows, 0)
    assert tracker.stats.snapshot().get("requests", 0) == 0
    wrong = StreamTracking(
        config,
        lambda frame, b: frame.df,
        stream_id="bad",
        location=tmp_path / "out",
        key="path",
        tracker=tracker,
    )
    with pytest.raises(InvalidConfig, match="must return a TrackedFrame"):
        wrong(rows.where("path is not null"), 1)
    assert not (tmp_path / "out" / "batch-00000001").exists()


def test_a_rerun_batch_that_differs_is_refused_not_applied(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """Batch 0 run twice on different rows (a non-deterministic source): in the re-run the
    key closes, so its create would carry another value under the same op id; the chain
    refuses it (OpIdReused) and the key is reported refused. Called directly, as
    foreachBatch would."""
    from xor_ack_dynamodb.spark.streaming import DIFFERS

    tracking = StreamTracking(
        config,
        lambda frame, b: frame.select("k", "v"),
        stream_id="nd",
        location=tmp_path,
        key="k",
        closes="last",
    )
    schema = "k string, v string, last boolean"
    tracking(spark.createDataFrame([("k1", "a", False)], schema), 0)
    assert tracking.reports()[0].pending == ["k1"]
    tracking(spark.createDataFrame([("k1", "a", True)], schema), 0)
    assert tracking.reports()[0].refused == {"k1": DIFFERS}
    status = XorAckDynamoDB.from_config(config).status(tracking.tag("k1"))
    assert (status.state, status.version) == ("pending", 2)  # as the first run left it


def test_bad_arguments_are_refused_before_anything_runs(config: AckConfig, tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig):
        StreamTracking(config, _job, stream_id="", location=tmp_path, key="path")
    with pytest.raises(InvalidConfig):
        StreamTracking(config, _job, stream_id="s", location="s3://bucket/x", key="path")
    with pytest.raises(InvalidConfig):
        StreamTracking(config, _job, stream_id="s", location=tmp_path, key="path", format="orc")
    assert BatchReport.from_json(BatchReport(3, {"k": "t"}, acked=["k"]).to_json()).acked == ["k"]


@pytest.fixture(scope="module")
def remote(connect_url: str) -> Iterator[Any]:
    """A session on the test session's Spark Connect server (``connect_url``, whose
    ``foreachBatch`` workers connect back before they import)."""
    with remote_session(connect_url) as session:
        yield session


def test_streaming_under_spark_connect(remote: Any, config: AckConfig, tmp_path: Path) -> None:
    """The same query through Spark Connect: the batch function is pickled to the server
    and runs there (its own tracker, from the picklable config); the client reads the
    batch reports from the shared location. A batch whose sink fails is re-run from the
    checkpoint and acked once."""
    from pyspark.errors import StreamingQueryException

    inbox, checkpoint, out = tmp_path / "inbox", tmp_path / "checkpoint", tmp_path / "out"
    inbox.mkdir()
    files = _files(3)
    clock = time.time() - 100
    for i, (name, lines) in enumerate(files.items()):
        land(inbox, name, lines, clock + i)

    def job(frame: TrackedFrame, batch_id: int) -> TrackedFrame:  # local: pickled by value
        return frame.select("path", "value")

    def failing(frame: TrackedFrame, batch_id: int) -> TrackedFrame:  # every write task raises
        from pyspark.sql import functions as F

        fail = F.when(F.col("value").isNotNull(), F.raise_error(F.lit("injected sink failure")))
        return frame.select("path", F.coalesce(fail.cast("string"), F.col("value")).alias("value"))

    def tracking(job: Any) -> StreamTracking:
        return StreamTracking(config, job, stream_id="connect", location=out, key="path")

    with pytest.raises(StreamingQueryException, match="injected sink failure"):
        _query(remote, inbox, checkpoint, tracking(failing)).awaitTermination()
    again = tracking(job)
    _query(remote, inbox, checkpoint, again).awaitTermination()
    reports = again.reports()
    assert [r.batch_id for r in reports] == [0, 1]
    assert sorted(Path(k).name for r in reports for k in r.acked) == sorted(files)
    statuses = XorAckDynamoDB.from_config(config).status_many(again.tag(k) for r in reports for k in r.acked)
    assert {(s.state, s.version) for s in statuses.values()} == {("acked", 2)}
    rows = remote.read.parquet(str(out / "batch-*")).collect()
    written = Counter((Path(r["path"]).name, r["value"]) for r in rows)
    assert written == Counter((name, line) for name, lines in files.items() for line in lines)

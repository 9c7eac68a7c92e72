"""The Spark layer on chains of both modes (issue 10): tracked RDDs and tracked
DataFrames with ``mode="sum"`` chains count exactly, ack every root, isolate a failing
root and replay it, exactly as with xor chains (parametrised where a run is cheap); and
the driver reads back only the chains whose outcome its own requests did not return.
Real Spark (local[2], session-wide) against the moto server over HTTP."""

from __future__ import annotations

import dataclasses
import operator
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from pyspark import cloudpickle
from spark_helpers import CORPUS, corpus_files, plain_count, read_counts

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.jobs.wordcount.job import find_inputs, run_wordcount
from xor_ack_dynamodb.spark import CsvPartitionWriter, Tracking, read_csv_parts
from xor_ack_dynamodb.spark.frame import FrameAttempt, FrameTracking
from xor_ack_dynamodb.spark.tags import Group, group_for

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

modes = pytest.mark.parametrize("mode", ["xor", "sum"])
both_apis = pytest.mark.parametrize("api", ["frame", "rdd"])


@pytest.fixture
def sum_config(moto_server: LocalDynamoDB) -> AckConfig:
    config = dataclasses.replace(moto_server.config(unique_table("sparksum")), mode="sum")
    XorAckDynamoDB.from_config(config).create_table()
    return config


def _config(moto_server: LocalDynamoDB, mode: str) -> AckConfig:
    config = dataclasses.replace(moto_server.config(unique_table(f"spark{mode}")), mode=mode)
    XorAckDynamoDB.from_config(config).create_table()
    return config


# -- no Spark needed ----------------------------------------------------------------


def test_group_operations_and_checks() -> None:
    xor, add = Group("xor", 8), Group("sum")
    assert xor.value(5) == (5).to_bytes(8, "big") and add.value(-5) == -5
    assert xor.finished(7) == 7 and add.finished(7) == -7
    with pytest.raises(InvalidConfig, match="edge_size must be 8"):
        group_for("sum", 16)
    with pytest.raises(InvalidConfig, match="mode"):
        group_for("max", 8)
    assert group_for("xor", 16) == Group("xor", 16)


def test_a_sum_tracker_with_an_xor_config_is_refused(spark: Any, moto_server: LocalDynamoDB) -> None:
    config = moto_server.config(unique_table("mixed"))
    with pytest.raises(InvalidConfig, match="sum mode"):
        Tracking(
            spark.sparkContext,
            config,
            tracker=XorAckDynamoDB.from_config(dataclasses.replace(config, mode="sum")),
        )
    with pytest.raises(InvalidConfig, match="edge_size"):
        Tracking(spark.sparkContext, dataclasses.replace(config, mode="sum"), edge_size=16)


# -- the word count on both pipelines ---------------------------------------------------


@both_apis
def test_wordcount_on_sum_chains(spark: Any, api: str, sum_config: AckConfig, tmp_path: Path) -> None:
    files = corpus_files()
    report = run_wordcount(spark, find_inputs([CORPUS]), tmp_path, sum_config, api=api)
    assert read_counts(tmp_path / "counts.csv") == plain_count(files)
    assert all(f.state == "acked" and f.attempts == 1 for f in report.files)
    statuses = XorAckDynamoDB.from_config(sum_config).status_many(f.tag for f in report.files)
    assert len(statuses) == len(files)
    assert all(s.mode == "sum" and s.state == "acked" and s.value == 0 for s in statuses.values())
    if api == "frame":
        # One create and one stamp per file; a completing sum stamp is an UpdateItem (ADD)
        # and the PutItem that stores acked. No read afterwards: every stamp said acked.
        assert report.requests["requests.UpdateItem"] == len(files)
        assert report.requests["requests.PutItem"] == 2 * len(files)
        assert report.requests["requests.BatchGetItem"] == 0


@both_apis
def test_failed_files_on_sum_chains_are_replayed_and_counted_once(
    spark: Any, api: str, sum_config: AckConfig, tmp_path: Path
) -> None:
    files = corpus_files()
    report = run_wordcount(spark, find_inputs([CORPUS]), tmp_path, sum_config, api=api, fail_rate=0.2, seed=7)
    assert all(f.attempts == 2 and f.state == "acked" for f in report.files)
    assert all("InjectedFailure" in f.history[0]["reason"] for f in report.files)
    assert read_counts(tmp_path / "counts.csv") == plain_count(files)
    tracker = XorAckDynamoDB.from_config(sum_config)
    first = tracker.status_many(f.history[0]["tag"] for f in report.files)
    # The first attempts' chains failed and hold what the failing words never finished.
    assert all(s.state == "failed" and s.value != 0 for s in first.values())


# -- tracked RDDs ---------------------------------------------------------------------


def _letters(text: str) -> list[str]:
    return text.split()


def _no_x(word: str) -> str:
    if word == "x":
        raise ValueError("no x allowed")
    return word


@modes
def test_rdd_shuffle_of_many_chains_and_a_failing_root(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path, mode: str
) -> None:
    """Words shared by several roots meet in one reduced record of several roots; a
    record that raises fails its root (every attempt), and the job runs again over the
    others; the rest are acked with exact counts."""
    config = _config(moto_server, mode)
    roots = ["a b c a", "b c x d", "a a a", "q"]
    tracking = Tracking(spark.sparkContext, config)
    prefix = tracking.run_id

    def job(started: Any, attempt: int) -> None:
        writer = CsvPartitionWriter(str(tmp_path / f"a{attempt}"), header=("word", "count"))
        words = started.fan_out(_letters).map(_no_x).filter(lambda w: w != "q")
        words.map(lambda w: (w, 1)).reduce_by_key(operator.add, 3).sink(writer)

    report = tracking.run(roots, lambda r: f"{prefix}/{r}", job, max_attempts=2)
    assert [o.state for o in report.outcomes] == ["acked", "failed", "acked", "acked"]
    bad = report.outcomes[1]
    assert len(bad.attempts) == 2 and all("no x allowed" in (a.reason or "") for a in bad.attempts)
    # The failing root's words are in no output: its record raised, the output (whose
    # records are of several roots) was discarded and the job ran again over the others;
    # on attempt 2 it fails alone again, and its output is discarded with nothing left.
    first = {r["word"]: int(r["count"]) for r in read_csv_parts(tmp_path / "a1")}
    assert first == {"a": 5, "b": 1, "c": 1}
    assert {r["word"]: int(r["count"]) for r in read_csv_parts(tmp_path / "a2")} == {}
    statuses = tracking.tracker.status_many(o.tag for o in report.outcomes if o.tag)
    assert all(s.mode == mode for s in statuses.values())
    for outcome in report.outcomes:
        status = statuses[outcome.tag]  # type: ignore[index]
        assert status.state == outcome.state
        assert status.value.acked == (outcome.state == "acked")  # zero exactly when acked


def test_rdd_sum_chains_replay_a_sink_failure(spark: Any, sum_config: AckConfig, tmp_path: Path) -> None:
    """A sink that fails on attempt 1 fails its chains (sum mode); the replay acks them."""
    tracking = Tracking(spark.sparkContext, sum_config)
    prefix = tracking.run_id
    good = CsvPartitionWriter(str(tmp_path / "parts"), header=("word",), to_row=lambda w: (w,))

    def job(started: Any, attempt: int) -> None:
        def writer(index: int, values: list[Any]) -> None:
            if attempt == 1:
                raise OSError("disk full")
            good(index, values)

        started.fan_out(_letters).sink(writer)

    report = tracking.run(["a b", "c"], lambda r: f"{prefix}/{r}", job)
    assert [[a.state for a in o.attempts] for o in report.outcomes] == [["failed", "acked"]] * 2
    assert "disk full" in (report.outcomes[0].attempts[0].reason or "")
    assert sorted(r["word"] for r in read_csv_parts(tmp_path / "parts")) == ["a", "b", "c"]


# -- tracked DataFrames ---------------------------------------------------------------

ORDERS = [("o1", "apple banana"), ("o1", "apple"), ("o2", "cherry"), ("o3", "banana banana durian")]


@modes
def test_frame_chains_of_both_modes(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path, mode: str
) -> None:
    """Every root acked with exact rows, in either mode: each chain created with its
    root edge and finished by one stamp once the write committed (minus the root edge
    for a sum chain), and nothing read afterwards."""
    from pyspark.sql import functions as F

    config = _config(moto_server, mode)

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(spark.createDataFrame(ORDERS, "order string, items string"), "order")
        items = frame.explode(F.split("items", " "), "item")
        return items.group_by("order", "item").count().write(tmp_path / f"a{attempt.number}")

    tracking = FrameTracking(spark, config)
    report = tracking.run(["o1", "o2", "o3"], lambda k: k, job, max_attempts=1)
    assert [o.state for o in report.outcomes] == ["acked"] * 3
    rows = {(r["order"], r["item"]): r["count"] for r in spark.read.parquet(str(tmp_path / "a1")).collect()}
    assert rows == {
        ("o1", "apple"): 2,
        ("o1", "banana"): 1,
        ("o2", "cherry"): 1,
        ("o3", "banana"): 2,
        ("o3", "durian"): 1,
    }
    # Two writes per root and no read: each stamp returned acked.
    assert report.counters["requests.BatchGetItem"] == 0
    statuses = tracking.tracker.status_many(o.tag for o in report.outcomes if o.tag)
    assert {s.mode for s in statuses.values()} == {mode}
    # One create, one stamp (and the PutItem that stores a sum chain's end).
    assert all(s.version == (3 if mode == "sum" else 2) for s in statuses.values())


@modes
def test_frame_creates_and_stamps_as_transactions(spark: Any, moto_server: LocalDynamoDB, mode: str) -> None:
    """``transactions=True``: each way one TransactWriteItems per 100 roots instead of a
    request per root; the outcome is the same, and nothing is read afterwards."""
    from pyspark.sql import functions as F

    config = _config(moto_server, mode)
    out = Path(spark.conf.get("spark.local.dir", "/tmp")) / f"txn-{unique_table('out')}"

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(spark.createDataFrame(ORDERS, "order string, items string"), "order")
        items = frame.explode(F.split("items", " "), "item")
        return items.group_by("order", "item").count().write(out / f"a{attempt.number}")

    tracking = FrameTracking(spark, config, transactions=True)
    report = tracking.run(["o1", "o2", "o3", "o4"], lambda k: k, job, max_attempts=1)
    assert [o.state for o in report.outcomes] == ["acked"] * 4
    assert report.counters["requests.TransactWriteItems"] == 2
    assert report.counters["requests.PutItem"] + report.counters["requests.UpdateItem"] == 0
    # No read at all: the creates cached each chain's value, the stamps returned acked.
    assert report.counters["requests.BatchGetItem"] == 0
    statuses = tracking.tracker.status_many(o.tag for o in report.outcomes if o.tag)
    assert all(s.state == "acked" and s.mode == mode for s in statuses.values())


def test_handed_chains_refuse_a_sum_tracker(spark: Any, sum_config: AckConfig) -> None:
    """Chains handed over from upstream are xor chains: a sum-mode tracking is refused
    before any request."""
    from xor_ack_dynamodb.spark.upstream import run_handed_frames, run_handed_rdd

    frames = FrameTracking(spark, sum_config)
    with pytest.raises(InvalidConfig, match="xor"):
        run_handed_frames(frames, [], lambda attempt: None)
    rdds = Tracking(spark.sparkContext, sum_config)
    with pytest.raises(InvalidConfig, match="xor"):
        run_handed_rdd(rdds, [], lambda started, attempt: None)
    assert frames.requests()["requests"] == 0 and rdds.requests()["requests"] == 0

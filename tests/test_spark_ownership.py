"""Chains are never adopted across runs (the Spark half of issue 9's safety bullet).

A run must own its chains: a second run over the same keys, a reused run id, or a key
that looks like another key's replay (``x`` on attempt 2 against ``x#2`` on attempt 1)
must never find a chain of another run, stamp it, fail it, or report its root acked
although its own output was never written. The first three tests use only the API that
existed before tags carried a nonce, so they can be run against the old code (they fail
there: see the module's notes in docs/spark.md, "Chains belong to their run").
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from pyspark import cloudpickle
from spark_helpers import CORPUS, read_counts

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB, new_stamp
from xor_ack_dynamodb.jobs.wordcount.job import find_inputs, run_wordcount
from xor_ack_dynamodb.spark import CsvPartitionWriter, Tracking

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def sc(spark: Any) -> Any:
    return spark.sparkContext


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("owner"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def _words(text: str) -> list[str]:
    return text.split()


def _file_key(root: str) -> str:
    return f"file/{root}"


class _BrokenWriter:
    def __call__(self, index: int, values: list[Any]) -> None:
        raise OSError("disk full")


def test_a_second_run_over_the_same_keys_does_not_adopt_the_first_runs_chains(
    sc: Any, config: AckConfig, tmp_path: Path
) -> None:
    roots = ["a b", "c d"]
    writer = CsvPartitionWriter(str(tmp_path / "first"), header=("word",), to_row=lambda w: (w,))

    def first_job(started: Any, attempt: int) -> None:
        started.fan_out(_words).sink(writer)

    first = Tracking(sc, config).run(roots, _file_key, first_job)
    assert [o.state for o in first.outcomes] == ["acked", "acked"]

    def second_job(started: Any, attempt: int) -> None:
        started.fan_out(_words).sink(_BrokenWriter())

    # Its sink writes nothing: nothing of the second run may be reported acked.
    second = Tracking(sc, config).run(roots, _file_key, second_job, max_attempts=1)
    assert [o.state for o in second.outcomes] == ["failed", "failed"]
    assert all("disk full" in (o.attempts[-1].reason or "") for o in second.outcomes)
    assert {o.tag for o in second.outcomes}.isdisjoint({o.tag for o in first.outcomes})


def test_a_reused_run_id_does_not_adopt_the_first_runs_chains(
    sc: Any, config: AckConfig, tmp_path: Path
) -> None:
    inputs = find_inputs([CORPUS / "psalm-023.txt", CORPUS / "sonnet-116.txt"])
    first = run_wordcount(sc, inputs, tmp_path / "first", config, run_id="nightly")
    assert [f.state for f in first.files] == ["acked", "acked"]
    # Same run id, every word failing: no file of the second run is counted or acked.
    second = run_wordcount(
        sc,
        inputs,
        tmp_path / "second",
        config,
        run_id="nightly",
        fail_rate=0.9,
        fail_attempts=9,
        max_attempts=1,
    )
    assert [f.state for f in second.files] == ["failed", "failed"]
    assert read_counts(tmp_path / "second" / "counts.csv") == Counter()


class _FailsX:
    def __call__(self, word: str) -> str:
        if word == "x":
            raise ValueError("x always fails")
        return word


def test_a_replay_never_meets_another_roots_first_attempt(sc: Any, config: AckConfig, tmp_path: Path) -> None:
    """Root ``x`` replayed on attempt 2 used to get the tag ``x#2``: the tag of root
    ``x#2`` on attempt 1, acked by then. Attempts are now encoded apart from the key."""
    writer = CsvPartitionWriter(str(tmp_path / "out"), header=("word",), to_row=lambda w: (w,))

    def job(started: Any, attempt: int) -> None:
        started.map(_FailsX()).sink(writer)

    report = Tracking(sc, config).run(["x", "x#2"], lambda r: r, job, max_attempts=2)
    states = {o.root: o for o in report.outcomes}
    assert states["x#2"].state == "acked" and len(states["x#2"].attempts) == 1
    assert states["x"].state == "failed" and len(states["x"].attempts) == 2
    assert all("x always fails" in (a.reason or "") for a in states["x"].attempts)


# -- a chain that exists under our tag is someone else's: never touched ------------------


def _foreign_acked_chain(config: AckConfig, tag: str) -> int:
    """Another writer's chain under ``tag``, acked; returns its version."""
    tracker = XorAckDynamoDB.from_config(config)
    stamp = new_stamp(8)
    tracker.create(tag, stamp)
    tracker.stamp(tag, stamp)
    status = tracker.status(tag)
    assert status.state == "acked"
    return status.version


def test_rdd_run_leaves_a_foreign_chain_with_its_tag_alone(
    sc: Any, config: AckConfig, tmp_path: Path
) -> None:
    from xor_ack_dynamodb.spark.tags import TagScheme

    scheme = TagScheme("owned", "00112233445566ff")
    version = _foreign_acked_chain(config, scheme.tag("a", 1))
    writer = CsvPartitionWriter(str(tmp_path / "out"), header=("word",), to_row=lambda w: (w,))

    def job(started: Any, attempt: int) -> None:
        started.fan_out(_words).sink(writer)

    tracking = Tracking(sc, config, run_id="owned", nonce=scheme.nonce)
    report = tracking.run(["a", "b"], lambda r: r, job, max_attempts=2)
    a, b = report.outcomes
    assert b.state == "acked"
    assert a.state == "failed" and len(a.attempts) == 1 and "conflict" in (a.attempts[0].reason or "")
    assert XorAckDynamoDB.from_config(config).status(scheme.tag("a", 1)).version == version  # untouched


@pytest.mark.parametrize("kind", ["same keys", "same run id", "replay vs key"])
def test_frame_runs_never_adopt_chains(spark: Any, config: AckConfig, tmp_path: Path, kind: str) -> None:
    """The DataFrame path: the same three situations, each second run failing to write."""
    from pyspark.sql import functions as F

    from xor_ack_dynamodb.spark.frame import FrameTracking

    files = []
    for name in ("x", "x#2"):
        path = tmp_path / "in" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text("x y\n", encoding="utf-8")
        files.append(str(path))

    def job(fail_x: bool) -> Any:
        def run(attempt: Any) -> Any:
            frame = attempt.read_text()
            if fail_x:
                frame = frame.fail_when(F.col("path").endswith("/x"), "x always fails")
            return frame.write(tmp_path / f"out-{attempt.number}-{id(attempt)}")

        return run

    if kind == "replay vs key":
        report = FrameTracking(spark, config).run(files, lambda p: Path(p).name, job(True), max_attempts=2)
        states = [o.state for o in report.outcomes]
        assert states == ["failed", "acked"] and len(report.outcomes[0].attempts) == 2
        return
    run_id = "nightly" if kind == "same run id" else None
    first = FrameTracking(spark, config, run_id=run_id).run(files, lambda p: Path(p).name, job(False))
    assert [o.state for o in first.outcomes] == ["acked", "acked"]
    second = FrameTracking(spark, config, run_id=run_id).run(
        files, lambda p: Path(p).name, job(True), max_attempts=1
    )
    assert [o.state for o in second.outcomes] == ["failed", "acked"]
    assert {o.tag for o in second.outcomes}.isdisjoint({o.tag for o in first.outcomes})


def test_frame_run_leaves_a_foreign_chain_with_its_tag_alone(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    from xor_ack_dynamodb.spark.frame import FrameTracking
    from xor_ack_dynamodb.spark.tags import TagScheme

    paths = []
    for name in ("a", "b"):
        path = tmp_path / "in" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text("one two\n", encoding="utf-8")
        paths.append(str(path))
    scheme = TagScheme("owned", "00112233445566ff")
    version = _foreign_acked_chain(config, scheme.tag(paths[0], 1))
    tracking = FrameTracking(spark, config, run_id="owned", nonce=scheme.nonce)
    report = tracking.run(paths, lambda p: p, lambda a: a.read_text().write(tmp_path / "out"), max_attempts=2)
    a, b = report.outcomes
    assert b.state == "acked"
    assert a.state == "failed" and len(a.attempts) == 1 and "conflict" in (a.attempts[0].reason or "")
    assert XorAckDynamoDB.from_config(config).status(scheme.tag(paths[0], 1)).version == version
    assert report.counters["chains_refused"] == 1


def test_runs_refuse_trackers_that_delete_completed_chains(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path
) -> None:
    """A deleted chain reads as missing, so a run would replay a root whose output it
    wrote: every Spark runner refuses ``delete_on_ack`` before sending anything."""
    from xor_ack_dynamodb import errors
    from xor_ack_dynamodb.spark import FrameTracking, StreamTracking

    config = moto_server.config(unique_table("deleting"), delete_on_ack=True)
    tracker = XorAckDynamoDB.from_config(config)
    with pytest.raises(errors.InvalidConfig, match="delete_on_ack"):
        Tracking(spark.sparkContext, config, tracker=tracker)
    with pytest.raises(errors.InvalidConfig, match="delete_on_ack"):
        FrameTracking(spark, config, tracker=tracker)
    with pytest.raises(errors.InvalidConfig, match="delete_on_ack"):
        StreamTracking(config, lambda frame, batch: frame, stream_id="s", location=tmp_path, key="k")
    assert tracker.stats.total_requests == 0  # not even the table was looked at

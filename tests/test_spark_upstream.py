"""Chains started upstream, continued and completed by Spark jobs (DataFrame and RDD
paths): a Lambda-style caller creates each chain with a plain ``create(..., owner=...)``
and hands the job one edge in the input rows; the job finishes it and acks through its
own rows. Chains that are already acked, failed, expired, missing or of another owner
are reported and never written to; nothing is created."""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, unique_table
from spark_helpers import remote_session

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.serverless.envelope import Envelope
from xor_ack_dynamodb.spark import (
    CsvPartitionWriter,
    FrameTracking,
    Handed,
    Noted,
    Tracking,
    handed_from_rows,
    read_csv_parts,
    run_handed_frames,
    run_handed_rdd,
)
from xor_ack_dynamodb.spark.frame.sources import BAD_BYTES_NOTE

pytestmark = pytest.mark.spark

OWNER = "lambda-inc-7f3a"


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("upstream"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


class Upstream:
    """What a Lambda does before handing work to Spark: create chains and hand edges."""

    def __init__(self, config: AckConfig) -> None:
        self.tracker = XorAckDynamoDB.from_config(config)
        # A tracker whose clock is an hour behind: its chains (ttl 60 s) read expired now.
        self.past = XorAckDynamoDB(
            config.table, client=self.tracker.client, ttl=60, clock=Clock(time.time() - 3600)
        )
        self.rows: list[tuple[str, str, str, str]] = []
        self.kept: dict[str, bytes] = {}

    def hand(
        self, tag: str, items: list[str], *, owner: str = OWNER, keep_one: bool = False, expired: bool = False
    ) -> bytes:
        """Create ``tag`` with one edge for Spark (and with ``keep_one`` a second edge the
        Lambda keeps and finishes later); hand Spark's edge in the rows."""
        edge = os.urandom(16)
        kept = os.urandom(16) if keep_one else bytes(16)
        value = bytes(a ^ b for a, b in zip(edge, kept, strict=True))
        (self.past if expired else self.tracker).create(tag, value, owner=owner)
        if keep_one:
            self.kept[tag] = kept
        self.rows += [(tag, edge.hex(), OWNER, item) for item in items]
        return edge

    def frame(self, spark: Any) -> Any:
        schema = "xor_ack_tag string, xor_ack_edge string, xor_ack_owner string, item string"
        return spark.createDataFrame(self.rows, schema)


def _setup(up: Upstream) -> dict[str, int]:
    """Every case; returns the versions of the chains that must not be touched."""
    up.hand("up/expired", ["x"], expired=True)  # a chain whose deadline passed long ago
    up.hand("up/a", ["apple banana", "apple"])
    up.hand("up/b", ["cherry"], keep_one=True)
    up.hand("up/empty", [""])
    done = up.hand("up/acked", ["y"])
    up.tracker.stamp("up/acked", done, owner=OWNER)
    up.hand("up/failed", ["z"])
    up.tracker.fail("up/failed", reason="upstream gave up", owner=OWNER)
    up.hand("up/other", ["w"], owner="somebody-else")  # handed as OWNER: not the chain's owner
    up.rows.append(("up/missing", os.urandom(16).hex(), OWNER, "v"))  # never created
    untouched = ("up/acked", "up/failed", "up/other", "up/expired")
    return {t: s.version for t, s in up.tracker.status_many(untouched).items()}


EXPECTED = {
    "up/a": "acked",
    "up/b": "pending",
    "up/empty": "acked",
    "up/acked": "refused",
    "up/failed": "refused",
    "up/other": "refused",
    "up/expired": "refused",
    "up/missing": "refused",
}


def _check(up: Upstream, report: Any, untouched: dict[str, int]) -> None:
    states = {o.key: o.state for o in report.outcomes}
    assert states == EXPECTED
    reasons = {o.key: o.attempts[-1].reason for o in report.outcomes}
    assert "already acked" in reasons["up/acked"] and "already failed" in reasons["up/failed"]
    assert "already expired" in reasons["up/expired"] and "another owner" in reasons["up/other"]
    assert "no such chain" in reasons["up/missing"]
    after = up.tracker.status_many([*untouched, "up/missing"])
    assert {t: after[t].version for t in untouched} == untouched  # nothing written to them
    assert "up/missing" not in after  # and nothing created
    # The job finished its edge of up/b; the Lambda finishes the edge it kept: acked.
    assert up.tracker.stamp("up/b", up.kept["up/b"], owner=OWNER).acked
    statuses = up.tracker.status_many(["up/a", "up/b", "up/empty"])
    assert {t: (s.state, s.owner) for t, s in statuses.items()} == {
        t: ("acked", OWNER) for t in ("up/a", "up/b", "up/empty")
    }


def test_handed_chains_completed_by_a_dataframe_job(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    up = Upstream(config)
    untouched = _setup(up)
    rows = up.frame(spark)
    handed = handed_from_rows(rows)
    assert [h.tag for h in handed] == sorted(EXPECTED)
    tracking = FrameTracking(spark, config)

    def job(attempt: Any) -> Any:
        frame = attempt.start(rows, "xor_ack_tag").select("xor_ack_tag", "item")
        words = frame.explode(F.split("item", " "), "word").where(F.col("word") != "")
        return words.group_by("word").count().write(tmp_path / "out", tag_column="chain")

    report = run_handed_frames(tracking, handed, job)
    # The same edge handed again to another job (a redelivered message): the chain
    # knows the stamp that finished it (op id of the edge) and refuses another.
    version = up.tracker.status("up/b").version
    again = run_handed_frames(FrameTracking(spark, config), [h for h in handed if h.tag == "up/b"], job)
    assert [(o.state, o.attempts[-1].reason) for o in again.outcomes] == [
        ("refused", "not adopted: this edge was already finished by another job")
    ]
    assert up.tracker.status("up/b").version == version

    def written() -> list[tuple[str, str, int]]:
        rows = spark.read.parquet(str(tmp_path / "out")).collect()
        return sorted((r["chain"], r["word"], r["count"]) for r in rows)

    # Published: the acked chain's rows only; up/b's part is done but its chain waits on
    # the edge the Lambda kept, so its rows stay staged.
    assert written() == [("up/a", "apple", 2), ("up/a", "banana", 1)]
    _check(up, report, untouched)  # the Lambda finishes up/b: acked
    assert tracking.publish_pending(tmp_path / "out") == 1
    # Only the continued chains' rows are written; refused chains' rows are not processed.
    assert written() == [("up/a", "apple", 2), ("up/a", "banana", 1), ("up/b", "cherry", 1)]
    assert tracking.publish_pending(tmp_path / "out") == 0
    # Two writes per continued chain (finish the handed edge + start the job's, then the
    # commit's XOR), one read for all to refuse, one to report.
    print(f"\nhanded, DataFrame path: {len(handed)} handed, 3 continued: {dict(report.counters)}")
    assert report.counters["requests.PutItem"] == 6
    assert report.counters["requests.BatchGetItem"] == 2


def test_handed_chains_completed_by_an_rdd_job(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    up = Upstream(config)
    untouched = _setup(up)
    rows = up.frame(spark)
    items = {}
    for r in rows.collect():
        items.setdefault(r["xor_ack_tag"], []).append(r["item"])
    handed = [Handed(h.tag, h.edge, h.owner, root=items[h.tag]) for h in handed_from_rows(rows)]
    tracking = Tracking(spark.sparkContext, config, edge_size=16)
    out = tmp_path / "out"

    def job(started: Any, attempt: int) -> Any:
        def words(lines: list[str]) -> list[str]:
            return [w for line in lines for w in line.split()]

        return (
            started.fan_out(words)
            .map(lambda w: (w, 1))
            .reduce_by_key(operator.add, 2)
            .sink(CsvPartitionWriter(str(out), header=("word", "count"), to_row=lambda r: r))
        )

    report = run_handed_rdd(tracking, handed, job)
    print(f"\nhanded, RDD path: {len(handed)} handed, 3 continued: {dict(report.counters)}")
    # Only the continued chains' records are processed.
    assert sorted((r["word"], int(r["count"])) for r in read_csv_parts(out)) == [
        ("apple", 2),
        ("banana", 1),
        ("cherry", 1),
    ]
    # up/b handed again to another run (a redelivery): its stamp is refused by the chain
    # (the edge's op id came with another value), the root is left out of the job.
    version = up.tracker.status("up/b").version
    other = Tracking(spark.sparkContext, config, edge_size=16)
    again = run_handed_rdd(other, [h for h in handed if h.tag == "up/b"], job)
    assert [(o.state, o.attempts[-1].reason) for o in again.outcomes] == [
        ("refused", "not adopted: this edge was already finished by another job")
    ]
    assert up.tracker.status("up/b").version == version
    _check(up, report, untouched)


def test_an_aborted_job_fails_the_handed_chains(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    up = Upstream(config)
    up.hand("up/c", ["boom"])
    tracking = FrameTracking(spark, config)

    def job(attempt: Any) -> Any:
        raise RuntimeError("the Spark job was aborted")

    report = run_handed_frames(tracking, handed_from_rows(up.frame(spark)), job)
    assert [(o.state, o.attempts[-1].reason) for o in report.outcomes] == [
        ("failed", "this job did not complete its part")
    ]
    assert report.job_errors == ["RuntimeError: the Spark job was aborted"]
    assert up.tracker.status("up/c").state == "failed"


def test_handed_roots_keep_the_notes_of_their_rows(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    """docs/spark.md: a root's notes show in its outcome, handed roots too, on both
    paths: a handed file read by ``read_text`` with bad bytes (replaced) is acked with
    the bad-bytes note; a handed root the RDD job notes (``Noted``) is acked with it."""
    up = Upstream(config)
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_bytes(b"apple banana\n")
    bad.write_bytes(b"cherry \xff\xfe durian\n")
    roots = {"up/good": str(good), "up/bad": str(bad)}
    handed = [Handed(tag, up.hand(tag, []), OWNER, root=path) for tag, path in roots.items()]

    def frame_job(attempt: Any) -> Any:
        return attempt.read_text().write(tmp_path / "out")

    report = run_handed_frames(FrameTracking(spark, config), handed, frame_job)
    assert [(o.root, o.key, o.state, o.notes) for o in report.outcomes] == [
        (str(good), "up/good", "acked", []),
        (str(bad), "up/bad", "acked", [BAD_BYTES_NOTE]),
    ]

    def noted(lines: list[str]) -> Any:  # nested: pickled by value for the executors
        words = [w for line in lines for w in line.split()]
        return Noted(words, "odd line") if any("\ufffd" in line for line in lines) else words

    lines = {"up/rdd-good": ["apple banana"], "up/rdd-bad": ["cherry \ufffd durian"]}
    handed = [Handed(tag, up.hand(tag, []), OWNER, root=text) for tag, text in lines.items()]
    writer = CsvPartitionWriter(str(tmp_path / "rdd"), header=("word",), to_row=lambda w: (w,))
    tracking = Tracking(spark.sparkContext, config, edge_size=16)
    report = run_handed_rdd(tracking, handed, lambda started, _: started.fan_out(noted).sink(writer))
    assert [(o.key, o.state, o.notes) for o in report.outcomes] == [
        ("up/rdd-good", "acked", []),
        ("up/rdd-bad", "acked", ["odd line"]),
    ]


def test_bad_handed_input_is_refused_before_any_request(spark: Any, config: AckConfig) -> None:
    tracking = FrameTracking(spark, config)
    before = tracking.requests()["requests"]
    bad = [
        [Handed("t", b"\x00" * 16, OWNER)],
        [Handed("t", b"\x01" * 4, OWNER)],
        [Handed("t", b"\x01" * 16, "")],
        [Handed("t", b"\x01" * 16, OWNER), Handed("t", b"\x02" * 16, OWNER)],
    ]
    for handed in bad:
        with pytest.raises(InvalidConfig):
            run_handed_frames(tracking, handed, lambda attempt: None)
    rdd = Tracking(spark.sparkContext, config)  # 8-byte edges: a 16-byte edge is refused
    with pytest.raises(InvalidConfig, match="8-byte edges"):
        run_handed_rdd(rdd, [Handed("t", b"\x01" * 16, OWNER)], lambda started, attempt: None)
    assert tracking.requests()["requests"] == before
    rows = spark.createDataFrame(
        [("t", "zz", OWNER)], "xor_ack_tag string, xor_ack_edge string, xor_ack_owner string"
    )
    with pytest.raises(InvalidConfig, match="not hex"):
        handed_from_rows(rows)
    envelope = Envelope(tag="t", edge=b"\x05" * 16, owner=OWNER, mode="xor")
    assert Handed.from_envelope(envelope, root="s3://in/a") == Handed("t", b"\x05" * 16, OWNER, "s3://in/a")


@pytest.fixture(scope="module")
def remote(connect_url: str) -> Iterator[Any]:
    with remote_session(connect_url) as session:
        yield session


def test_handed_chains_completed_under_spark_connect(remote: Any, config: AckConfig, tmp_path: Path) -> None:
    """The DataFrame path through Spark Connect: the client reads the hand-over rows,
    refuses and continues chains, the server runs the job."""
    from pyspark.sql import functions as F

    up = Upstream(config)
    up.hand("up/a", ["apple banana", "apple"])
    up.hand("up/b", ["cherry"], keep_one=True)
    done = up.hand("up/acked", ["y"])
    up.tracker.stamp("up/acked", done, owner=OWNER)
    rows = up.frame(remote)
    tracking = FrameTracking(remote, config)

    def job(attempt: Any) -> Any:
        frame = attempt.start(rows, "xor_ack_tag").select("xor_ack_tag", "item")
        words = frame.explode(F.split("item", " "), "word")
        return words.group_by("word").count().write(tmp_path / "out", tag_column="chain")

    report = run_handed_frames(tracking, handed_from_rows(rows), job)
    assert {o.key: o.state for o in report.outcomes} == {
        "up/a": "acked",
        "up/b": "pending",
        "up/acked": "refused",
    }
    assert up.tracker.stamp("up/b", up.kept["up/b"], owner=OWNER).acked
    assert tracking.publish_pending(tmp_path / "out") == 1  # up/b's rows, now acked
    written = sorted(
        (r["chain"], r["word"], r["count"]) for r in remote.read.parquet(str(tmp_path / "out")).collect()
    )
    assert written == [("up/a", "apple", 2), ("up/a", "banana", 1), ("up/b", "cherry", 1)]

"""Tracked output you can trust after the ack (issue 19): Spark's own writer and commit
protocol, a staged write per (run, attempt), and only the acked roots' rows published,
so a plain ``spark.read`` of the location and ``acked_rows`` return exactly the rows of
acked attempts; replays and second runs into one location; a crash between the ack and
the publish; what the sink refuses before any task; roots derived from the data."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.spark import FrameTracking, OutputRefused
from xor_ack_dynamodb.spark.frame import FrameAttempt
from xor_ack_dynamodb.spark.frame import commit as protocol

pytestmark = pytest.mark.spark

ORDERS = [("a", "apple"), ("a", "pear"), ("b", "cherry"), ("c", "plum")]


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("commit"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def orders(spark: Any) -> Any:
    return spark.createDataFrame(ORDERS, "order string, item string")


def _plain(spark: Any, out: Path, fmt: str = "parquet") -> Counter[tuple[str, str]]:
    reader = spark.read.option("header", "true") if fmt == "csv" else spark.read
    return Counter((r["order"], r["item"]) for r in reader.format(fmt).load(str(out)).collect())


def _failing_once(out: Path, fmt: str = "parquet") -> Any:
    """A job that fails root ``b`` on attempt 1 (after its row was staged); every attempt
    writes to ``out``."""
    from pyspark.sql import functions as F

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(orders(attempt.spark), "order")
        if attempt.number == 1:
            frame = frame.fail_when(F.col("item") == "plum", "no plums today")
        return frame.write(out, format=fmt)

    return job


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_replay_into_the_same_location_keeps_every_acked_row(
    spark: Any, config: AckConfig, tmp_path: Path, fmt: str
) -> None:
    """The issue's first finding: both attempts write ``out/``; before, the second
    write's ``part-00000`` replaced the first's and the acked rows of ``a`` and ``b``
    disappeared. Now each write has names of its own and only acked rows are
    published: the failed attempt's row of ``c`` never shows."""
    out = tmp_path / "out"
    tracking = FrameTracking(spark, config)
    report = tracking.run(["a", "b", "c"], lambda k: k, _failing_once(out, fmt))
    assert [o.state for o in report.outcomes] == ["acked", "acked", "acked"]
    assert [len(o.attempts) for o in report.outcomes] == [1, 1, 2]
    assert _plain(spark, out, fmt) == Counter(ORDERS)
    reader = spark.read.option("header", "true") if fmt == "csv" else spark.read
    acked = tracking.acked_rows(reader.format(fmt).load(str(out)), report).collect()
    assert Counter((r["order"], r["item"]) for r in acked) == Counter(ORDERS)
    assert {r["xor_ack_tag"] for r in acked} == report.acked_tags()
    # Nothing staged is left once published; the ledgers stay.
    meta = out / "_xor_ack"
    assert not [p for p in meta.iterdir() if p.is_dir()]
    assert len(list(meta.glob("*.json"))) == 2


def test_a_second_run_into_the_same_location_never_touches_the_first_runs_rows(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = FrameTracking(spark, config).run(
        ["a", "b"], lambda k: k, lambda a: a.start(orders(a.spark), "order", others="skip").write(out)
    )
    second = FrameTracking(spark, config).run(
        ["a", "c"], lambda k: k, lambda a: a.start(orders(a.spark), "order", others="skip").write(out)
    )
    assert {o.state for o in first.outcomes + second.outcomes} == {"acked"}
    expected = Counter(ORDERS) + Counter([("a", "apple"), ("a", "pear")])
    assert _plain(spark, out) == expected
    tags = Counter(r["xor_ack_tag"] for r in spark.read.parquet(str(out)).collect())
    assert set(tags) == first.acked_tags() | second.acked_tags()


def test_a_crash_between_the_ack_and_the_publish_loses_nothing(
    spark: Any, config: AckConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run dies after its stamps, before its publish: its roots are acked and
    nothing is visible; the ledger says what was committed, and the next tracked write
    into the location (or ``publish_pending``) publishes it, once."""
    out = tmp_path / "out"
    real = protocol.publish

    def crash(*args: Any, **kwargs: Any) -> None:
        raise SystemExit("the driver died")

    monkeypatch.setattr(protocol, "publish", crash)
    tracking = FrameTracking(spark, config)
    with pytest.raises(SystemExit):
        tracking.run(
            ["a", "b"], lambda k: k, lambda a: a.start(orders(a.spark), "order", others="skip").write(out)
        )
    monkeypatch.setattr(protocol, "publish", real)
    states = tracking.tracker.status_many([tracking.tags.escaped(k, 1) for k in ("a", "b")])
    assert {s.state for s in states.values()} == {"acked"}
    assert not list(out.glob("part-*"))
    assert tracking.publish_pending(out) == 1
    assert tracking.publish_pending(out) == 0  # claimed: never twice
    assert _plain(spark, out) == Counter([("a", "apple"), ("a", "pear"), ("b", "cherry")])


def test_a_crash_between_the_ledger_and_the_stamps_is_finished_by_the_next_write(
    spark: Any, config: AckConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger is on disk before the first stamp goes out. The run dies there (no
    stamp sent, nothing settled): its chains are pending and nothing is visible; the
    next tracked write into the location (here ``publish_pending``) sends the stamps the
    ledger names, under the run's op ids, and publishes. Sent again, they change
    nothing."""
    out = tmp_path / "out"
    tracking = FrameTracking(spark, config)
    tracker = tracking.tracker
    real = type(tracker).stamp
    ledgers: list[list[Path]] = []

    class Died(BaseException):
        """A crash of the driver: no handler of the library's sees it."""

    def dying(self: Any, *args: Any, **kwargs: Any) -> Any:
        ledgers.append(sorted((out / "_xor_ack").glob("*.json")))
        raise Died()

    monkeypatch.setattr(type(tracker), "stamp", dying)
    with pytest.raises(Died):
        tracking.run(
            ["a", "b"], lambda k: k, lambda a: a.start(orders(a.spark), "order", others="skip").write(out)
        )
    monkeypatch.setattr(type(tracker), "stamp", real)
    assert ledgers and len(ledgers[0]) == 1  # written whole before the first stamp
    ledger = json.loads(ledgers[0][0].read_text())
    assert sorted(ledger["stamps"]) == sorted(ledger["tags"]) and ledger["errors"] == {}
    tags = [tracking.tags.escaped(k, 1) for k in ("a", "b")]
    assert {s.state for s in tracker.status_many(tags).values()} == {"pending"}
    assert not list(out.glob("part-*"))
    assert tracking.publish_pending(out) == 1
    assert {s.state for s in tracker.status_many(tags).values()} == {"acked"}
    assert all(s.version == 2 for s in tracker.status_many(tags).values())  # one create, one stamp
    assert _plain(spark, out) == Counter([("a", "apple"), ("a", "pear"), ("b", "cherry")])
    assert tracking.publish_pending(out) == 0


def test_an_interrupted_publish_is_finished_from_its_claim(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    tracking = FrameTracking(spark, config)
    tracking.run(
        ["a", "b"], lambda k: k, lambda a: a.start(orders(a.spark), "order", others="skip").write(out)
    )
    # Put one published file back where the claim says the moves come from, as if the
    # publisher died halfway through its moves.
    meta = out / "_xor_ack"
    [claim] = meta.glob("*.published")
    source = meta / json.loads(claim.read_text())["from"]
    source.mkdir()
    moved = sorted(out.glob("part-*"))[0]
    moved.rename(source / moved.name)
    assert tracking.publish_pending(out) == 1
    assert _plain(spark, out) == Counter([("a", "apple"), ("a", "pear"), ("b", "cherry")])


def test_the_sink_refuses_a_column_named_like_its_tag_before_any_task(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """The documented upstream example used to write Parquet with two ``xor_ack_tag``
    columns (unreadable: COLUMN_ALREADY_EXISTS) and ack it. Now: refused, typed, nothing
    written, nothing stamped (the chains are failed by the run)."""
    from pyspark.sql import functions as F

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(orders(attempt.spark), "order", others="skip")
        return frame.with_column("xor_ack_tag", F.lit("mine")).write(tmp_path / "out")

    tracking = FrameTracking(spark, config)
    with pytest.raises(OutputRefused, match="already has a column 'xor_ack_tag'"):
        tracking.run(["a"], lambda k: k, job)
    assert not (tmp_path / "out").exists()
    for bad in ({"format": "json"}, {"tag_column": "_hidden"}):
        with pytest.raises(OutputRefused):
            tracking.run(
                ["a"],
                lambda k: k,
                lambda a, bad=bad: a.start(orders(a.spark), "order", others="skip").write(
                    tmp_path / "x", **bad
                ),
            )
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputRefused, match="is a file"):
        tracking.run(
            ["a"],
            lambda k: k,
            lambda a: a.start(orders(a.spark), "order", others="skip").write(tmp_path / "file"),
        )


def test_roots_from_the_data(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    """``run_rows``: one root per distinct key, found in Spark; no list to collect first,
    and no row left out. A replay runs over the failed roots' rows only."""
    from pyspark.sql import functions as F

    out = tmp_path / "out"
    attempts: list[int] = []

    def job(frame: Any) -> Any:
        number = len(attempts) + 1
        attempts.append(number)
        if number == 1:
            frame = frame.fail_when(F.col("item") == "cherry", "no cherries")
        return frame.write(out)

    tracking = FrameTracking(spark, config)
    report = tracking.run_rows(orders(spark), "order", job)
    assert [(o.key, o.state, len(o.attempts)) for o in report.outcomes] == [
        ("a", "acked", 1),
        ("b", "acked", 2),
        ("c", "acked", 1),
    ]
    assert _plain(spark, out) == Counter(ORDERS)
    with pytest.raises(InvalidConfig, match="without a key"):
        tracking.run_rows(spark.createDataFrame([("a",), (None,)], "order string"), "order", job)


def test_a_row_of_no_root_is_refused_not_dropped(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    """Before, ``start(df, key)`` silently left out rows whose key was not a root."""
    tracking = FrameTracking(spark, config)
    with pytest.raises(InvalidConfig, match="not the key of any root"):
        tracking.run(
            ["a", "b"], lambda k: k, lambda a: a.start(orders(a.spark), "order").write(tmp_path / "out")
        )


def test_explode_leaves_its_source_array_behind(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(orders(attempt.spark), "order", others="skip").with_column(
            "parts", F.split("item", "r")
        )
        exploded = frame.explode("parts", "part")
        assert exploded.columns == ["order", "item", "part"]
        return exploded.write(tmp_path / "out")

    report = FrameTracking(spark, config).run(["a"], lambda k: k, job)
    assert report.outcomes[0].state == "acked"
    rows = sorted((r["item"], r["part"]) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert rows == [("apple", "apple"), ("pear", ""), ("pear", "pea")]


def test_each_root_keeps_its_first_reason_and_note_whatever_spark_retries(spark: Any) -> None:
    """The side channel: per root, the failure reasons and notes observed as a set of
    (root, text) pairs, of which the first by code point order (UTF-8's byte order) is
    kept; a set is the same however many times Spark runs a task (here: every row
    twice, as a retried task would). A failing row of several roots (NULL root) fails
    them all; an observation Spark did not run (its branch proven empty) is computed by
    a query of its own."""
    from pyspark.sql import functions as F

    from xor_ack_dynamodb.spark.frame.tracked import Probes

    rows = [
        (0, "b: later", None),
        (0, "a: first", "note z"),
        (0, None, "note y"),
        (1, None, None),
        # U+FF01 before U+1F600 in UTF-8 (Spark's order) and in code points; not in UTF-16.
        (2, "\U0001f600", None),
        (2, "\uff01", None),
    ]
    df = spark.createDataFrame(rows + rows, "_xa_chain int, reason string, note string").repartition(3)
    probes = Probes()
    failed = probes.observe(df, "fail", F.col("reason"))
    kept = failed.where(F.col(probes.column()).isNull()).drop(probes.column())
    noted = probes.observe(kept, "note", F.col("note")).drop(probes.column())
    assert noted.count() == 4  # the rows that did not fail
    errors, notes, mixed = probes.read(3)
    assert not mixed
    assert errors == {0: "a: first", 2: "\uff01"}
    assert notes == {0: "note y"}

    several = spark.createDataFrame([(None, "x")], "_xa_chain int, reason string")
    probes = Probes()
    probes.observe(several, "fail", F.col("reason")).collect()
    assert probes.read(2) == ({0: "x", 1: "x"}, {}, False)

    probes = Probes()
    probes.observe(df, "fail", F.col("reason")).where(F.lit(False)).collect()  # pruned by the optimizer
    assert probes.read(3)[0] == {0: "a: first", 2: "\uff01"}

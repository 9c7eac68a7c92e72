"""The tracked DataFrame API on a real Spark (classic local[2,4]; the Connect tests run
some of the same against a Spark Connect server): every operation keeps each chain's
XOR, so a chain is acked exactly when all its rows reached the committed write, and a
row lost or duplicated behind the tracker's back keeps its chain open."""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from spark_helpers import sql_executions

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.spark.frame import FrameAttempt, FrameTracking, TrackedFrame

pytestmark = pytest.mark.spark


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("frames"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


ORDERS = [
    ("o1", "apple banana", "eu"),
    ("o1", "apple", "eu"),
    ("o2", "cherry", "us"),
    ("o2", "", "us"),
    ("o3", "banana banana durian", "xx"),
]


def orders(spark: Any) -> Any:
    return spark.createDataFrame(ORDERS, "order string, items string, region string")


def _pipeline(attempt: FrameAttempt, out: Path, *, lookup: Any = None, how: str = "inner") -> Any:
    from pyspark.sql import functions as F

    frame = attempt.start(orders(attempt.spark), "order", others="skip")
    if lookup is not None:
        frame = frame.join(lookup, "region", how)
    items = frame.explode(F.split("items", " "), "item").where(F.col("item") != "")
    counts = items.group_by("order", "item").agg(F.count(F.lit(1)).alias("n"))
    return counts.write(out / f"attempt-{attempt.number}")


def _rows(spark: Any, path: Path) -> Counter[tuple[str, str]]:
    rows = spark.read.parquet(str(path)).collect()
    return Counter({(r["order"], r["item"]): r["n"] for r in rows})


def test_explode_filter_group_write_acks_every_root(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    tracking = FrameTracking(spark, config)
    report = tracking.run(["o1", "o2", "o3", "o4"], lambda k: k, lambda a: _pipeline(a, tmp_path))
    # o4 has no rows: the committed write holds all it made (nothing), and it is acked.
    assert [o.state for o in report.outcomes] == ["acked"] * 4
    assert _rows(spark, tmp_path / "attempt-1") == Counter(
        {
            ("o1", "apple"): 2,
            ("o1", "banana"): 1,
            ("o2", "cherry"): 1,
            ("o3", "banana"): 2,
            ("o3", "durian"): 1,
        }
    )
    statuses = tracking.tracker.status_many(o.tag for o in report.outcomes)
    assert all(s.version == 2 and s.stamp.acked for s in statuses.values())  # one create, one stamp
    assert report.counters["requests.UpdateItem"] + report.counters["requests.PutItem"] == 8


def test_inner_join_with_a_lookup(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    regions = spark.createDataFrame([("eu", "Europe"), ("us", "Americas")], "region string, name string")
    tracking = FrameTracking(spark, config)
    report = tracking.run(["o1", "o3"], lambda k: k, lambda a: _pipeline(a, tmp_path, lookup=regions))
    # o3's region has no match: its rows are dropped as a plain inner join drops them,
    # and it is acked.
    assert [o.state for o in report.outcomes] == ["acked", "acked"]
    assert _rows(spark, tmp_path / "attempt-1") == Counter({("o1", "apple"): 2, ("o1", "banana"): 1})


def test_a_lookup_with_duplicate_keys_is_refused(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    regions = spark.createDataFrame([("eu", "Europe"), ("eu", "EU")], "region string, name string")
    tracking = FrameTracking(spark, config)
    with pytest.raises(InvalidConfig, match="more than one row"):
        tracking.run(["o1"], lambda k: k, lambda a: _pipeline(a, tmp_path, lookup=regions))
    assert not (tmp_path / "attempt-1").exists()


@pytest.mark.parametrize("names", [("count", "name"), ("COUNT", "name"), ("size", "count")])
def test_a_lookup_may_have_a_column_named_count(
    spark: Any, config: AckConfig, tmp_path: Path, names: tuple[str, str]
) -> None:
    """The duplicate-key check counts under a name of its own: a lookup keyed by, or
    holding, a column ``count`` joins as in plain PySpark, and its duplicates are still
    refused."""
    from pyspark.sql import functions as F

    key, other = names
    lookup = spark.createDataFrame([(6, "six"), (0, "zero"), (1, "one")], f"{key} int, {other} string")

    def job(attempt: FrameAttempt, lookup: Any) -> Any:
        frame = attempt.start(orders(attempt.spark), "order", others="skip")
        frame = frame.with_column(key, F.length("items")).join(lookup, key, "left")
        counts = frame.group_by("order", other).agg(F.count(F.lit(1)).alias("n"))
        return counts.write(tmp_path / f"attempt-{attempt.number}")

    plain = orders(spark).where(F.col("order") == "o2").withColumn(key, F.length("items"))
    expected = Counter((r["order"], r[other]) for r in plain.join(lookup, key, "left").collect())
    report = FrameTracking(spark, config).run(["o2"], lambda k: k, partial(job, lookup=lookup))
    assert [o.state for o in report.outcomes] == ["acked"]
    written = spark.read.parquet(str(tmp_path / "attempt-1")).collect()
    assert Counter({(r["order"], r[other]): r["n"] for r in written}) == expected
    assert expected == Counter({("o2", "six"): 1, ("o2", "zero"): 1})
    with pytest.raises(InvalidConfig, match="more than one row"):
        FrameTracking(spark, config).run(["o2"], lambda k: k, partial(job, lookup=lookup.unionByName(lookup)))


def test_failures_are_isolated_per_root_and_replayed(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    """A row that fails (``fail_when``) fails its root on attempt 1 only; the replay
    acks it, and a cross-root aggregate over :meth:`FrameTracking.acked_rows` counts
    every order exactly once although attempt 1 wrote o2's other rows."""
    from pyspark.sql import functions as F

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(orders(attempt.spark), "order")
        items = frame.explode(F.split("items", " "), "item").where(F.col("item") != "")
        if attempt.number == 1:
            items = items.fail_when(F.col("item") == "cherry", "no cherries today")
        return items.group_by("order", "item").count().write(tmp_path / f"attempt-{attempt.number}")

    tracking = FrameTracking(spark, config)
    report = tracking.run(["o1", "o2", "o3"], lambda k: k, job)
    states = {o.root: o for o in report.outcomes}
    assert states["o1"].state == "acked" and len(states["o1"].attempts) == 1
    assert [a.state for a in states["o2"].attempts] == ["failed", "acked"]
    assert states["o2"].attempts[0].reason == "no cherries today"
    written = spark.read.parquet(str(tmp_path / "attempt-1"), str(tmp_path / "attempt-2"))
    totals = tracking.acked_rows(written, report).groupBy("item").agg(F.sum("count").alias("n")).collect()
    assert {r["item"]: r["n"] for r in totals} == {"apple": 2, "banana": 3, "cherry": 1, "durian": 1}


def test_a_permanent_failure_is_not_replayed(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(orders(attempt.spark), "order", others="skip")
        frame = frame.fail_when(F.col("region") == "xx", "unknown region", permanent=True)
        return frame.group_by("region").count().write(tmp_path / f"attempt-{attempt.number}")

    report = FrameTracking(spark, config).run(["o1", "o3"], lambda k: k, job, max_attempts=3)
    o1, o3 = report.outcomes
    assert o1.state == "acked"
    assert o3.state == "failed" and len(o3.attempts) == 1
    assert o3.attempts[0].reason == "permanent: unknown region"


def test_one_tracked_write_per_attempt(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(orders(attempt.spark), "order", others="skip")
        frame.write(tmp_path / "first")
        return frame.write(tmp_path / "second")

    with pytest.raises(InvalidConfig, match="one tracked write"):
        FrameTracking(spark, config).run(["o1"], lambda k: k, job)


def test_tracking_columns_are_guarded(spark: Any, config: AckConfig) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(1, 0)], "x int, _xa_chain int")
    frame = TrackedFrame(lambda probes: df, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfig):
        frame.with_column("_xa_chain", F.lit(0))
    with pytest.raises(InvalidConfig):
        frame.drop("_xa_chain")
    with pytest.raises(InvalidConfig):
        frame.group_by("_xa_chain")
    with pytest.raises(InvalidConfig):
        frame.select("x", "_xa_chain")


# -- files --------------------------------------------------------------------------------


def test_a_big_file_is_read_in_splits_and_its_chain_fans_out_per_split(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    path = tmp_path / "big.txt"
    path.write_text("alpha beta gamma delta\n" * 12_000, encoding="utf-8")  # 276 KB
    seen: list[int] = []

    def job(attempt: FrameAttempt) -> Any:
        lines = attempt.read_text()
        seen.append(lines.df.select(F.spark_partition_id()).distinct().count())
        words = lines.explode(F.split("line", " "), "word")
        return words.group_by("word").count().write(tmp_path / "out")

    spark.conf.set("spark.sql.files.maxPartitionBytes", str(32 << 10))
    try:
        report = FrameTracking(spark, config).run([str(path)], lambda p: p, job)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert report.outcomes[0].state == "acked"
    assert seen[0] >= 4  # Spark's own splits: 276 KB in splits of 32 KiB
    counts = {r["word"]: r["count"] for r in spark.read.parquet(str(tmp_path / "out")).collect()}
    assert counts == {"alpha": 12_000, "beta": 12_000, "gamma": 12_000, "delta": 12_000}


def test_a_missing_file_fails_its_root_only(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("x\n", encoding="utf-8")
    report = FrameTracking(spark, config).run(
        [str(good), str(tmp_path / "gone.txt")],
        lambda p: p,
        lambda a: a.read_text().write(tmp_path / f"out-{a.number}"),
        max_attempts=2,
    )
    good_outcome, gone = report.outcomes
    assert good_outcome.state == "acked"
    assert gone.state == "failed" and len(gone.attempts) == 2
    assert "FileNotFoundError" in (gone.attempts[0].reason or "")


def test_a_local_table_is_a_local_relation(spark: Any) -> None:
    """``local_table`` keeps its types and nulls, and its rows are in the plan (a
    ``LocalTableScan``, where ``createDataFrame`` of Python rows scans an RDD)."""
    from xor_ack_dynamodb.spark.frame.columns import local_table

    columns = {
        "k": ("string", ["a", None, "c'\\"]),
        "n": ("int", [0, 1, None]),
        "e": ("bigint", [-(2**63), 2**63 - 1, None]),
        "g": ("boolean", [True, None, False]),
    }
    table = local_table(spark, columns)
    assert [tuple(r) for r in table.collect()] == list(zip(*(v for _, v in columns.values()), strict=True))
    assert [f.dataType.simpleString() for f in table.schema] == ["string", "int", "bigint", "boolean"]
    assert local_table(spark, {"k": ("string", [])}).collect() == []

    def plan(df: Any) -> str:
        return str(df._jdf.queryExecution().executedPlan().toString())

    assert plan(table).startswith("LocalTableScan")
    assert "LocalTableScan" not in plan(spark.createDataFrame([("a", 0)], "k string, n int"))


def test_many_local_files_are_listed_by_the_driver_not_by_a_job(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """Past 32 paths Spark lists a read's files in a job of one task per path; the
    tracked reader lists local files on the driver instead (and puts Spark's setting
    back): no stage of the run has a task per file, and every count is exact."""
    from pyspark.sql import functions as F

    paths = []
    for i in range(40):
        path = tmp_path / "in" / f"f{i:02d}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"w{i} common\n", encoding="utf-8")
        paths.append(str(path))
    status = spark.sparkContext.statusTracker()
    before = set(status.getJobIdsForGroup())

    def job(attempt: FrameAttempt) -> Any:
        words = attempt.read_text().explode(F.split("line", " "), "word")
        return words.group_by("word").count().write(tmp_path / "out")

    report = FrameTracking(spark, config).run(paths, lambda p: p, job)
    assert {o.state for o in report.outcomes} == {"acked"}
    stages = [s for j in set(status.getJobIdsForGroup()) - before for s in status.getJobInfo(j).stageIds]
    tasks = [info.numTasks for info in map(status.getStageInfo, stages) if info is not None]
    assert tasks and max(tasks) < len(paths)
    assert spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.threshold", None) is None
    totals = spark.read.parquet(str(tmp_path / "out")).groupBy("word").sum("count").collect()
    assert {r[0]: r[1] for r in totals} == {"common": 40, **{f"w{i}": 1 for i in range(40)}}


def test_an_empty_or_null_array_gives_no_row_and_its_root_acks(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """docs/spark.md ("How the tracking works", explode): a row whose array is empty or
    null gives no row, as plain ``explode``; its root is acked with no row in the
    output (the committed write holds all it made), and the other roots' rows are all
    there."""
    from pyspark.sql import functions as F

    rows = [("a", []), ("b", None), ("c", ["x", "y"])]

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(attempt.spark.createDataFrame(rows, "root string, items array<string>"), "root")
        return frame.explode(F.col("items"), "item").select("root", "item").write(tmp_path / "out")

    report = FrameTracking(spark, config).run(["a", "b", "c"], lambda k: k, job)
    assert [o.state for o in report.outcomes] == ["acked"] * 3
    written = sorted((r["root"], r["item"]) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert written == [("c", "x"), ("c", "y")]


def test_a_write_across_roots_runs_again_without_the_roots_that_did_not_ack(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """A ``group_by`` across roots stages plain Spark's groups (one row per key, a
    NULL tag on the rows of several roots). Such rows count every root's input, so
    they stand only if every root acks: a root failing in the rows makes the job run
    again over the others before any stamp (``runs == 2``, the failed root's reason
    kept; its rows in groups with other roots' are not counted), and a root whose
    stamp does not ack (failed by someone else between the write and the stamps)
    makes the job run again over the roots that acked, after the stamps. Either way the
    staged rows sum to the plain count over the acked roots, and the replay counts the
    rest once."""
    from pyspark.sql import functions as F

    keys = ["o1", "o2", "o3", "o4"]
    plain = {"apple": 2, "banana": 3, "cherry": 1, "durian": 1}

    def staged(url: str) -> list[dict[str, Any]]:  # read by pyarrow: no Spark query of its own
        import pyarrow.parquet as pq

        return list(pq.read_table(url).to_pylist())

    def run(mode: str) -> tuple[Any, dict[int, Any]]:
        results: dict[int, Any] = {}

        def job(attempt: FrameAttempt) -> Any:
            frame = attempt.start(orders(attempt.spark), "order", others="skip")
            items = frame.explode(F.split("items", " "), "item").where(F.col("item") != "")
            if mode == "fails" and attempt.number == 1:  # o1's banana is in a group of o1 and o3
                items = items.fail_when(
                    (F.col("order") == "o1") & (F.col("item") == "apple"), "no apples today"
                )
            if mode == "torn" and attempt.number == 1 and "o2" in attempt.keys:

                def before(seen: Any, stamps: Any) -> None:  # once: o2's chain, failed behind
                    attempt.commit.before = None  # the write's back
                    attempt.tracking.tracker.fail(attempt.tags[1], "taken")

                attempt.commit.before = before
            result = items.group_by("item").count().write(tmp_path / mode, publish=False)
            results.setdefault(attempt.number, result)
            return result

        return FrameTracking(spark, config).run(keys, lambda k: k, job), results

    report, results = run("clean")
    assert [o.state for o in report.outcomes] == ["acked"] * 4
    rows = staged(results[1].staged)
    assert sorted((r["item"], r["count"]) for r in rows) == sorted(plain.items())  # one row a word
    assert results[1].runs == 1
    assert {r["item"]: r["xor_ack_tag"] for r in rows}["durian"] == report.outcomes[2].tag  # o3's own
    assert {r["item"]: r["xor_ack_tag"] for r in rows}["banana"] is None  # o1's and o3's

    for mode, which, reason in (("fails", 0, "no apples today"), ("torn", 1, "taken")):
        report, results = run(mode)
        failed = report.outcomes[which]
        assert [(a.state, a.reason) for a in failed.attempts] == [("failed", reason), ("acked", None)], mode
        assert all(o.state == "acked" and len(o.attempts) == 1 for o in report.outcomes if o is not failed)
        assert results[1].runs == 2, mode
        ledgers = sorted(p.stem for p in (tmp_path / mode / "_xor_ack").glob("*.json"))
        assert ledgers == sorted(Path(r.staged).name for r in results.values()), mode  # no other write
        total: Counter[str] = Counter()
        for r in staged(results[1].staged) + staged(results[2].staged):
            total[r["item"]] += r["count"]
        assert total == plain, mode


def test_an_action_on_the_frame_before_its_write_hides_no_failure(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """A job may look at its frame before writing it (``frame.df.count()``, a ``show``):
    each write builds the frame again with observations of its own, so what an earlier
    action ran cannot stand for what the write saw."""
    from pyspark.sql import functions as F

    looked: list[int] = []

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(orders(attempt.spark), "order", others="skip")
        items = frame.explode(F.split("items", " "), "item")
        items = items.fail_when(F.col("item") == "durian", "no durians")
        looked.append(items.df.count())  # an action on the tracked frame first
        counted = items.group_by("order", "item").count()
        looked.append(counted.df.count())  # and on the very frame the write is made of
        return counted.write(tmp_path / f"a{attempt.number}")

    before = sql_executions(spark)
    report = FrameTracking(spark, config).run(["o1", "o3"], lambda k: k, job, max_attempts=1)
    o1, o3 = report.outcomes
    assert looked == [5, 3]
    assert o1.state == "acked"
    assert o3.state == "failed" and o3.attempts[0].reason == "no durians"
    # The user's two counts, the write and the publish of o1's rows (o3's left out): what
    # the write saw came with it, no query of its own.
    assert sql_executions(spark) - before == 4


def test_an_observation_spark_never_runs_is_computed_not_waited_for(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    """A ``transform`` may return a frame that is not made from its input: the
    observations upstream of it are then on no branch of what Spark runs, and would
    never complete. They are not waited for: a query of their own says which roots
    failed there, as the plain pipeline's condition says."""
    from pyspark.sql import functions as F

    def job(attempt: FrameAttempt) -> Any:
        frame = attempt.start(orders(attempt.spark), "order", others="skip")
        items = frame.explode(F.split("items", " "), "item")
        items = items.fail_when(F.col("item") == "durian", "no durians")
        fresh = attempt.spark.createDataFrame([("kiwi", 0)], "item string, _xa_chain int")
        return items.transform(lambda df: fresh).write(tmp_path / "out")

    report = FrameTracking(spark, config).run(["o1", "o3"], lambda k: k, job, max_attempts=1)
    o1, o3 = report.outcomes
    assert o1.state == "acked"
    assert o3.state == "failed" and o3.attempts[0].reason == "no durians"
    assert [r["item"] for r in spark.read.parquet(str(tmp_path / "out")).collect()] == ["kiwi"]

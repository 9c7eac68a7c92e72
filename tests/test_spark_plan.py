"""The tracked word count runs the plain job's plan: issue 38's first promise.

Both jobs run on the same files in this session: the plain PySpark word count (the same
words as the tracked one: Spark's text reader over the folder, NFC, ``explode`` of the
letters' runs, lower-case, one ``groupBy`` across files, written as Parquet) and the
tracked one (``frame_job``, chains in a ``MemoryAck``). Their executed plans are read from
Spark's SQL status store (the plan graph of each write and its metrics, as the Spark UI
shows them) and compared operator by operator: the tracked plan is the plain plan plus
the root column's nodes (a broadcast join of each line's file to its root, projections)
and the side channel's (``CollectMetrics``: the sources' notes, whether a group mixed
roots, the rows written); the same generators, aggregates and
exchanges, the same rows out of each aggregate and the same shuffle records. No ghost
row, edge or per-row hash is left: the rows that leave the scan are the rows that reach
the aggregate in both.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import corpus_files, plain_count

from xor_ack_dynamodb import AckConfig, MemoryAck
from xor_ack_dynamodb.jobs.wordcount.frame import NOT_LETTERS, fault_condition, frame_counts, run_frame
from xor_ack_dynamodb.jobs.wordcount.words import FaultPlan, Options
from xor_ack_dynamodb.spark.frame.sources import nfc
from xor_ack_dynamodb.spark.output import Location

pytestmark = pytest.mark.spark

#: Nodes the root column and the side channel add to the plain plan, and nothing else.
ADDED = {"CollectMetrics", "BroadcastHashJoin", "BroadcastExchange", "LocalTableScan", "Project"}
#: ``CollectMetrics`` has no generated code: the stage around it is two generated stages.
ADDED |= {"WholeStageCodegen"}
#: Nodes whose count and rows must be the plain plan's.
SAME = ("Scan text", "Generate", "HashAggregate", "Exchange", "Filter", "WriteFiles")


def _writes(spark: Any, since: int = 0) -> list[int]:
    """The ids of the executions that wrote files, from execution ``since`` on."""
    store = spark._jsparkSession.sharedState().statusStore()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    executions = store.executionsList()
    found = []
    for i in range(executions.size()):
        execution = executions.apply(i)
        if execution.executionId() >= since and "InsertIntoHadoopFsRelationCommand" in (
            execution.physicalPlanDescription()
        ):
            found.append(int(execution.executionId()))
    return found


def _last_write(spark: Any, execution: int | None = None) -> tuple[Counter[str], dict[str, list[int]]]:
    """The nodes of a write (by name; default the last) and, per node name, the rows
    each produced (``number of output rows``; ``shuffle records written`` for an
    exchange)."""
    store = spark._jsparkSession.sharedState().statusStore()
    last = execution if execution is not None else _writes(spark)[-1]
    graph = store.planGraph(last)
    metrics = store.executionMetrics(last)
    names: Counter[str] = Counter()
    rows: dict[str, list[int]] = {}
    nodes = graph.allNodes().iterator()
    while nodes.hasNext():
        node = nodes.next()
        name = re.sub(r" \(\d+\)$", "", str(node.name()).strip())  # WholeStageCodegen (3)
        names[name] += 1
        found = node.metrics().iterator()
        while found.hasNext():
            metric = found.next()
            if metric.name() in ("number of output rows", "shuffle records written"):
                value = metrics.get(metric.accumulatorId())
                if value.isDefined():
                    rows.setdefault(name, []).append(int(str(value.get()).replace(",", "")))
    return names, rows


def _corpus(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "in"
    folder.mkdir()
    texts = ["The cat sat on the mat.", "Ünïcode café, the CAFÉ!", "a b c\nthe end", "déjà vu the"]
    paths = []
    for i in range(12):
        path = folder / f"f{i:02d}.txt"
        path.write_text("\n".join(texts[(i + j) % len(texts)] for j in range(30)), encoding="utf-8")
        paths.append(path)
    return paths


def test_the_tracked_word_count_runs_the_plain_plan_plus_the_root_and_the_side_channel(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    paths = _corpus(tmp_path)
    lines = spark.read.text(str(tmp_path / "in")).select(nfc("value").alias("line"))
    words = lines.select(F.explode(F.array_remove(F.split("line", NOT_LETTERS), "")).alias("word"))
    plain = words.select(F.lower("word").alias("word")).groupBy("word").count()
    plain.write.parquet(str(tmp_path / "plain"))
    plain_nodes, plain_rows = _last_write(spark)

    options = Options(Location.of(tmp_path / "tracked"), "plan", tracker=MemoryAck())
    roots = [(i, str(p)) for i, p in enumerate(paths)]
    report = run_frame(spark, roots, AckConfig(table="in-memory"), options)
    assert all(o.state == "acked" for o in report.outcomes)
    tracked_nodes, tracked_rows = _last_write(spark)

    extra = tracked_nodes - plain_nodes
    assert set(extra) <= ADDED, extra
    assert not plain_nodes - tracked_nodes, plain_nodes - tracked_nodes
    assert tracked_nodes["CollectMetrics"] == 3  # the sources' notes, the groups mixing roots, the sink's
    # CollectMetrics has no generated code: the notes' node cuts the stage that reads the
    # lines in two, the groups' node the stage that aggregates (the sink's ends its stage).
    assert tracked_nodes["WholeStageCodegen"] == plain_nodes["WholeStageCodegen"] + 2
    for name in SAME:
        assert tracked_nodes[name] == plain_nodes[name], name
        assert tracked_rows.get(name) == plain_rows.get(name), (name, tracked_rows, plain_rows)
    # The same counts, staged across the files: one row a word.
    (write,) = [p for p in (tmp_path / "tracked/.parts/plan/_xor_ack").iterdir() if p.is_dir()]
    staged = spark.read.parquet(str(write)).select("word", "count").collect()
    assert sorted(map(tuple, staged)) == sorted(
        map(tuple, spark.read.parquet(str(tmp_path / "plain")).collect())
    )


@pytest.mark.parametrize("rate", [0.0001, 0.01])
def test_failed_files_run_again_apart_and_the_rest_is_read_once_more_without_them(
    spark: Any, tmp_path: Path, rate: float
) -> None:
    """Faults injected in a fraction of the words (attempt 1 only): the files they hit
    fail with their reason; the attempt's job runs again over the other files before
    any stamp, and Spark's input metrics show that run read only those files; the
    replay reads the failed ones; the counts over the acked files' writes are the plain
    count exactly."""
    files = corpus_files()
    roots = [(i, str(p)) for i, p in enumerate(files)]
    # The bundled corpus has 6,752 words: at 0.0001 a seed picks none as often as not.
    # The first seed whose plan picks a word, found by the plan's own condition.
    seed = next(s for s in range(50) if _picked(spark, files, FaultPlan(rate, seed=s)))
    faults = FaultPlan(rate, seed=seed)
    options = Options(Location.of(tmp_path / "out"), f"faults-{rate}", faults=faults, tracker=MemoryAck())
    first = spark._jsparkSession.sharedState().statusStore().executionsCount()
    report = run_frame(spark, roots, AckConfig(table="in-memory"), options)
    writes = _writes(spark, since=first)
    failed = [o for o in report.outcomes if len(o.attempts) > 1]
    assert failed
    assert all(o.attempts[0].state == "failed" for o in failed)
    assert all((o.attempts[0].reason or "").startswith("InjectedFailure: word ") for o in failed)
    assert all(o.state == "acked" for o in report.outcomes)
    # Attempt 1, its run again over the others (none when every file failed), the replay.
    others = [len(files) - len(failed)] if len(failed) < len(files) else []
    assert [_files_read(spark, w) for w in writes] == [len(files), *others, len(failed)]
    assert frame_counts(spark, options, report) == plain_count(files)


def _picked(spark: Any, files: list[Path], faults: FaultPlan) -> int:
    """How many words of ``files`` the fault plan picks on attempt 1 (the tracked job's
    own condition, over the same lines and positions)."""
    from pyspark.sql import functions as F

    path = F.regexp_replace(F.col("_metadata.file_path"), "^file:", "")  # the root's path, as given
    lines = spark.read.text([str(f) for f in files]).select(path.alias("path"), nfc("value").alias("line"))
    split = F.array_remove(F.split("line", NOT_LETTERS), "")
    words = lines.select("path", "line", F.posexplode(split).alias("position", "word"))
    return int(words.where(fault_condition(faults, 1)).count())


def _files_read(spark: Any, execution: int) -> int:
    """``number of files read`` of the write's text scan."""
    store = spark._jsparkSession.sharedState().statusStore()
    metrics = store.executionMetrics(execution)
    nodes = store.planGraph(execution).allNodes().iterator()
    while nodes.hasNext():
        node = nodes.next()
        if str(node.name()).strip() != "Scan text":
            continue
        found = node.metrics().iterator()
        while found.hasNext():
            metric = found.next()
            if metric.name() == "number of files read":
                return int(str(metrics.get(metric.accumulatorId()).get()).replace(",", ""))
    raise AssertionError(f"execution {execution} has no text scan")

"""How the tracked text reader hands files to Spark, and what a run costs per root.

- A folder whose files are all roots is given to Spark as the folder (one listing where
  Spark looked up each file: 7,100 files, 0.2 s against 1 to 2 s); any other file is
  named, and what Spark listed is checked against the roots before anything runs.
- A root Spark's reader leaves out even when named (``_x``, ``.x``, ``x._COPYING_``) is
  read by the Arrow reader: before, it got no line and was acked as an empty file.
- An attempt's stamps find its chains where their creates left them, however many roots
  it has (past the tracker's cache, each stamp read its chain again)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.spark.frame import FrameAttempt, FrameTracking, sources

pytestmark = pytest.mark.spark


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("folders"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


#: Names Spark's reader leaves out even when it is given them (Hadoop's hidden and
#: in-progress files): read by the Arrow reader instead, never acked empty.
HIDDEN = ["_under.txt", ".dot.txt", "late.txt._COPYING_"]


def _corpus(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """Folder ``whole``: 12 roots and nothing else. Folder ``mixed``: 8 roots, three of
    them :data:`HIDDEN`, beside ``stray.txt``, which is no root."""
    roots = []
    for folder, names in (
        ("whole", [f"w{i:02d}.txt" for i in range(12)]),
        ("mixed", [*HIDDEN, *(f"m{i}.txt" for i in range(5))]),
    ):
        for name in names:
            path = tmp_path / folder / name
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"{path.stem} common\nshared {folder}\n", encoding="utf-8")
            roots.append(str(path))
    (tmp_path / "mixed" / "stray.txt").write_text("stray common\n", encoding="utf-8")
    return roots, tmp_path / "whole", tmp_path / "mixed"


def _read_paths(df: Any) -> list[str]:
    """The paths Spark's file reads in the plan of ``df`` were given."""
    leaves = df._jdf.queryExecution().optimizedPlan().collectLeaves()
    paths = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() == "LogicalRelation":
            roots = leaf.relation().location().rootPaths()
            paths.extend(str(roots.apply(j).toString()) for j in range(roots.size()))
    return sorted(paths)


def _run(
    spark: Any, config: AckConfig, roots: list[str], out: Path
) -> tuple[Any, Counter[str], list[list[str]]]:
    from pyspark.sql import functions as F

    plans: list[list[str]] = []

    def job(attempt: FrameAttempt) -> Any:
        lines = attempt.read_text()
        plans.append(_read_paths(lines.df))
        words = lines.explode(F.split("line", " "), "word")
        return words.group_by("word").count().write(out)

    report = FrameTracking(spark, config).run(roots, lambda p: p, job)
    totals = spark.read.parquet(str(out)).groupBy("word").sum("count").collect()
    return report, Counter({r[0]: r[1] for r in totals}), plans


def _expected(roots: list[str]) -> Counter[str]:
    words: Counter[str] = Counter()
    for root in roots:
        words.update(Path(root).read_text(encoding="utf-8").split())
    return words


def test_a_folder_of_roots_is_read_as_one_path_and_other_files_are_named(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    roots, whole, mixed = _corpus(tmp_path)
    report, counts, plans = _run(spark, config, roots, tmp_path / "out")
    assert [o.state for o in report.outcomes] == ["acked"] * len(roots)
    assert counts == _expected(roots)
    assert counts["stray"] == 0 and counts["_under"] == counts[".dot"] == counts["late.txt"] == 1
    # One path for the whole folder, and the mixed folder's five other roots by name.
    assert plans == [sorted([f"file:{whole}", *(f"file:{mixed}/m{i}.txt" for i in range(5))])]


def test_what_spark_lists_in_a_folder_is_checked_against_the_roots(
    spark: Any, config: AckConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder check is made again on Spark's own listing, before anything runs: here
    the driver's look at ``mixed`` is made to miss its stray file (as a file made
    between the two looks would be). Spark's listing has it, so every file is named: no
    line of the stray is read, and every root acks with exactly its own words."""
    roots, whole, mixed = _corpus(tmp_path)
    seen = sources._whole_folders

    def fooled(uris: Any) -> dict[str, set[str]]:
        found = seen(uris)
        found[str(mixed)] = {r for r in roots if Path(r).parent == mixed and Path(r).name not in HIDDEN}
        return found

    monkeypatch.setattr(sources, "_whole_folders", fooled)
    report, counts, plans = _run(spark, config, roots, tmp_path / "out")
    assert [o.state for o in report.outcomes] == ["acked"] * len(roots)
    assert counts == _expected(roots)
    assert counts["stray"] == 0
    assert plans == [sorted(f"file:{r}" for r in roots if Path(r).name not in HIDDEN)]


@pytest.mark.parametrize("transactions", [False, True], ids=["single", "transactions"])
def test_a_run_with_more_roots_than_the_trackers_cache_reads_no_chain_before_its_stamp(
    spark: Any, config: AckConfig, tmp_path: Path, transactions: bool
) -> None:
    """A run's stamps find its chains where their creates left them, however many
    roots it has: with a tracker that keeps 4 chains (``cache_size=``, default 10,000)
    and 12 roots, each root costs one create and one stamp, and no read (a 35,500-file
    word count made 255 ``BatchGetItem``s more than that, and its stamps took three
    times as long, when the cache held 10,000)."""
    small = XorAckDynamoDB.from_config(config, cache_size=4)
    roots = [f"r{i:02d}" for i in range(12)]

    def job(attempt: FrameAttempt) -> Any:
        rows = attempt.spark.createDataFrame([(r, r) for r in roots], "root string, word string")
        return attempt.start(rows, "root").group_by("word").count().write(tmp_path / "out")

    report = FrameTracking(spark, config, tracker=small, transactions=transactions).run(
        roots, lambda r: r, job
    )
    assert [o.state for o in report.outcomes] == ["acked"] * len(roots)
    sent = {k: v for k, v in report.counters.items() if k.startswith("requests.")}
    one_each = {"requests.TransactWriteItems": 2} if transactions else {"requests.PutItem": 24}
    assert sent == one_each


def test_the_names_spark_skips_are_the_ones_spark_skips(spark: Any, tmp_path: Path) -> None:
    """``spark_skips`` against Spark's reader itself: each file holds one line, all are
    read by name in one read; Spark gives no line exactly for the names ``spark_skips``
    says (the Parquet exception for ``_metadata`` does not hold for text)."""
    names = ["_x.txt", "_k=v.txt", "_metadata", "_common_metadata", ".dot", "a._COPYING_", "plain.txt"]
    names += ["a_b.txt", "x.", "_", "=_x", "a.b._COPYING_x"]
    for name in names:
        (tmp_path / name).write_text("one line\n", encoding="utf-8")
    read = spark.read.text([f"file:{tmp_path / name}" for name in names]).select("_metadata.file_name")
    seen = {row[0] for row in read.collect()}
    assert {name: name not in seen for name in names} == {name: sources.spark_skips(name) for name in names}
    assert sorted(n for n in names if n not in seen) == [
        ".dot",
        "_",
        "_common_metadata",
        "_metadata",
        "_x.txt",
        "a._COPYING_",
    ]

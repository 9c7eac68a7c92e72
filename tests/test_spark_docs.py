"""Every Python example of docs/spark.md runs as written (a broken example fails the
suite): the blocks run in order in one namespace, in a fresh directory, with the names
the doc says are given (``config``, ``spark``, ``paths``, ``words_of``), chains handed
over by an "upstream" for the upstream example, and files in ``inbox/`` for the stream.
The README's Spark sections hold no Python (their commands are tested in
test_spark_wordcount.py: ``xor-ack wordcount``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from pyspark import cloudpickle
from spark_helpers import corpus_files, plain_count

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.jobs.wordcount.words import tokenize

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

DOC = Path(__file__).resolve().parents[1] / "docs" / "spark.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def words_of(path: str) -> list[tuple[str, str]]:
    return [(path, word) for word in tokenize(Path(path).read_text(encoding="utf-8"))]


def test_every_python_example_of_docs_spark_md_runs(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # Relative paths mean this directory to Spark too, as for a user who started it here.
    hadoop = spark._jvm.org.apache.hadoop.fs
    local = hadoop.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    before = local.getWorkingDirectory()
    local.setWorkingDirectory(hadoop.Path(str(tmp_path)))
    # Structured Streaming resolves a relative checkpoint against the JVM's own
    # directory (FileContext), not the file system's working directory.
    system = spark._jvm.java.lang.System
    user_dir = system.getProperty("user.dir")
    system.setProperty("user.dir", str(tmp_path))
    try:
        _run_examples(spark, moto_server, tmp_path)
    finally:
        local.setWorkingDirectory(before)
        system.setProperty("user.dir", user_dir)
    assert (tmp_path / "checkpoint").is_dir()


def _run_examples(spark: Any, moto_server: LocalDynamoDB, tmp_path: Path) -> None:

    config = moto_server.config(unique_table("docs"))
    tracker = XorAckDynamoDB.from_config(config)
    tracker.create_table()
    files = corpus_files()[:3]
    paths = [str(p) for p in files]
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for path in files:
        (inbox / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    # Upstream: two chains created by a Lambda-like writer, handed over as rows.
    owner = "upstream/lambda"
    handed = []
    for name, items in (("up-1", ["ink", "pen"]), ("up-2", ["nib"])):
        edge = bytes.fromhex("0123456789abcdef") if name == "up-1" else bytes.fromhex("fedcba9876543210")
        tracker.create(name, edge, owner=owner)
        handed += [(name, edge.hex(), owner, item) for item in items]
    columns = "xor_ack_tag string, xor_ack_edge string, xor_ack_owner string, item string"
    spark.createDataFrame(handed, columns).write.parquet(str(tmp_path / "handed"))

    given: dict[str, Any] = {"config": config, "spark": spark, "paths": paths, "words_of": words_of}
    namespace: dict[str, Any] = {}
    after: dict[str, dict[str, Any]] = {}
    examples = blocks()
    assert len(examples) >= 6
    for number, source in enumerate(examples, 1):
        namespace.update(given)
        exec(compile(source, f"{DOC}:block {number}", "exec"), namespace)
        name = next(
            (
                k
                for k in (
                    "run_rows",
                    "RDDTracking(sc",
                    "FailOnce",
                    "foreachBatch",
                    "run_handed_frames",
                    "FrameTracking(spark",
                )
                if k in source
            ),
            "",
        )
        after.setdefault(name, dict(namespace))

    # DataFrames: the published location is the acked rows, read plainly.
    rows = spark.read.parquet("out/words").groupBy("word").sum("count").collect()
    assert {r["word"]: r["sum(count)"] for r in rows} == dict(plain_count(files))
    assert [o.state for o in after["run_rows"]["report"].outcomes] == ["acked"] * 3
    # RDDs: every file acked.
    assert {o.state for o in after["RDDTracking(sc"]["report"].outcomes} == {"acked"}
    # The stream: every file of the inbox acked in a batch report; the hook fails a batch.
    stream = after["foreachBatch"]["tracking"]
    assert sorted(Path(k).name for r in stream.reports() for k in r.acked) == sorted(p.name for p in files)
    with pytest.raises(RuntimeError, match="injected failure in batch 0"):
        after["FailOnce"]["failing"].hook(0, "written")
    # Upstream: both handed chains acked, and the output readable as written (the
    # example used to write two xor_ack_tag columns: COLUMN_ALREADY_EXISTS on read).
    assert {o.state for o in after["run_handed_frames"]["report"].outcomes} == {"acked"}
    written = spark.read.parquet("handed-out/").collect()
    assert sorted((r["xor_ack_tag"], r["item"]) for r in written) == [
        ("up-1", "ink"),
        ("up-1", "pen"),
        ("up-2", "nib"),
    ]
    assert {s.state for s in tracker.status_many(["up-1", "up-2"]).values()} == {"acked"}

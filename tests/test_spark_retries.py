"""Spark task retries: tasks die on their first attempt right after their stamps landed,
Spark runs them again (local[2,4]: up to 4 attempts per task), and every chain must still
end exactly acked: each flush applied once (the retry's copy is recognised by its op id),
no chain reopened, none acked before all its output was written."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from spark_helpers import CORPUS, corpus_files, plain_count, read_counts, spark_context

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, new_stamp
from xor_ack_dynamodb.spark import DieOnFirstAttempt, Tracking
from xor_ack_dynamodb.spark.executor import Ledger
from xor_ack_dynamodb.wordcount import WordCountReport, find_inputs, run_wordcount

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sc() -> Iterator[Any]:
    with spark_context("local[2,4]") as context:
        yield context


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("retries"))
    config.connect().create_table()
    return config


def _sink_partitions_per_file(parts: Path) -> Counter[int]:
    """How many committed sink partitions hold rows of each file."""
    per_file: Counter[int] = Counter()
    for part in sorted(parts.glob("part-*.csv")):
        with part.open(newline="", encoding="utf-8") as handle:
            for file_id in {int(row["file"]) for row in csv.DictReader(handle)}:
                per_file[file_id] += 1
    return per_file


def _check_exactly_acked(report: WordCountReport, config: AckConfig, output: Path) -> None:
    assert read_counts(output / "counts.csv") == plain_count(corpus_files())
    assert all(f.state == "acked" and f.attempts == 1 for f in report.files), "no replay may be needed"
    statuses = config.connect().status_many(f.tag for f in report.files)
    per_file = _sink_partitions_per_file(output / ".parts" / report.run_id / "attempt-1")
    for file_id, f in enumerate(report.files):
        status = statuses[f.tag]
        assert status.state == "acked" and status.stamp.acked
        # One write for the create (already fanned out), then exactly one stamp per sink
        # partition holding the file's words: a retried flush applied twice would add a
        # version (and undo itself: the chain would not be zero).
        assert status.version == 1 + per_file[file_id], f.path


def test_tasks_dying_after_their_flush(sc: Any, config: AckConfig, tmp_path: Path) -> None:
    hook = DieOnFirstAttempt(steps=("read_words", "count_word", "sum_counts.unpack", "write_counts"))
    # 4 sink partitions on 2 cores: retried sinks re-send their stamps while other
    # partitions of the same chains have not stamped yet.
    report = run_wordcount(
        sc, find_inputs([CORPUS]), tmp_path, config, after_flush=hook, keep_parts=True, partitions=4
    )
    _check_exactly_acked(report, config, tmp_path)
    # The retries really happened and really re-sent their stamps: each was caught as a
    # duplicate by its op id (counted by the retried, successful tasks).
    assert report.requests["duplicates"] > 0


def test_python_workers_crashing_after_their_flush(sc: Any, config: AckConfig, tmp_path: Path) -> None:
    hook = DieOnFirstAttempt(steps=("read_words", "write_counts"), exit_process=True)
    report = run_wordcount(
        sc, find_inputs([CORPUS]), tmp_path, config, after_flush=hook, keep_parts=True, partitions=3
    )
    _check_exactly_acked(report, config, tmp_path)
    assert report.requests["duplicates"] > 0


def test_a_flush_sent_twice_is_applied_once(sc: Any, config: AckConfig) -> None:
    """What a retried task does, step by step on the driver: the same ledger contents
    flushed twice under the same step and partition change the chain once."""
    tracking = Tracking(sc, config)
    spec = tracking.spec(1)
    tag = f"{tracking.run_id}/root"
    children = [int.from_bytes(new_stamp(), "big") for _ in range(4)]
    root = int.from_bytes(new_stamp(), "big")

    start = Ledger(spec, "0-start", 0)
    start.create(tag, root)
    start.ack({tag: root ^ children[0] ^ children[1] ^ children[2] ^ children[3]})
    start.flush()
    start.flush()  # the retried fan-out: same create op id
    tracker = tracking.tracker
    assert tracker.status(tag).version == 1

    for _ in range(2):  # the first sink partition, and its retry
        sink = Ledger(spec, "1-sink", 0)
        sink.ack({tag: children[0] ^ children[1]})
        sink.flush()
    status = tracker.status(tag)
    assert status.state == "pending" and status.version == 2
    assert int.from_bytes(status.stamp, "big") == children[2] ^ children[3]

    last = Ledger(spec, "1-sink", 1)
    last.ack({tag: children[2] ^ children[3]})
    last.flush()
    assert tracker.status(tag).state == "acked"
    last.flush()  # a late speculative copy of the last partition: no error, no change
    status = tracker.status(tag)
    assert status.state == "acked" and status.version == 3 and status.stamp.acked
    assert tracking.requests()["duplicates"] >= 2

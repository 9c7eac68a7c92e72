"""The tracked word count, on both pipelines (DataFrames and RDDs), and the tracked-RDD
API, on a real Spark (local[2,4]) against the moto server over HTTP (executors are
separate Python processes: they reach it like any DynamoDB endpoint)."""

from __future__ import annotations

import contextlib
import json
import operator
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import unique_table
from pyspark import cloudpickle
from spark_helpers import (
    CORPUS,
    corpus_files,
    plain_count,
    plain_count_replacing,
    read_counts,
    spark_reads_back,
    sql_executions,
)

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.cli import main
from xor_ack_dynamodb.jobs.wordcount.frame import words_of
from xor_ack_dynamodb.jobs.wordcount.job import find_inputs, run_wordcount, tokenize
from xor_ack_dynamodb.spark import CsvPartitionWriter, Tracking, read_csv_parts
from xor_ack_dynamodb.spark.frame.sources import BAD_BYTES_NOTE

pytestmark = pytest.mark.spark

# Executors cannot import this module (tests/ is not on their path): ship the functions
# defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

both_apis = pytest.mark.parametrize("api", ["frame", "rdd"])


@pytest.fixture
def sc(spark: Any) -> Any:
    return spark.sparkContext


def _attempt_and_key(tag: str) -> tuple[int, str]:
    _run, _nonce, attempt, key = tag.split("/", 3)
    return int(attempt), key


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("spark"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def test_tokenize_rule() -> None:
    assert tokenize("Don't co-op: MP3 x²y café snake_case Ünïcödé") == [
        "don",
        "t",
        "co",
        "op",
        "mp",
        "x",
        "y",
        "café",
        "snake",
        "case",
        "ünïcödé",
    ]
    assert tokenize("cafe\u0301") == ["café"]  # combining accent, normalized to NFC
    assert tokenize("  42 -- !") == []


def test_the_jvm_splits_words_as_tokenize_does_in_generated_code(spark: Any) -> None:
    """The DataFrame job's words are tokenize's (lowercased after), and its split is
    plain expressions: a lambda (``filter``) would be evaluated row by row by Spark's
    interpreter, about a tenth of the word count's main stage."""
    from pyspark.sql import functions as F

    line = "  Don't co-op: MP3 x²y café snake_case Ünïcödé -- 42"
    words = spark.createDataFrame([(line,), ("",), ("  42 -- !",)], "line string").select(
        words_of(F.col("line")).alias("words")
    )
    assert [[w.lower() for w in r["words"]] for r in words.collect()] == [tokenize(line), [], []]
    plan = str(words._jdf.queryExecution().executedPlan().toString())
    assert "array_remove" in plan and "lambda" not in plan, plan


@both_apis
def test_the_drivers_tracker_is_the_only_one_either_path_uses(
    spark: Any, api: str, config: AckConfig, tmp_path: Path
) -> None:
    """``tracker=`` on both paths: only the driver talks to it, so with a ``MemoryAck``
    every file is acked there and the table ``config`` names gets no chain."""
    from xor_ack_dynamodb import MemoryAck

    tracker = MemoryAck()
    report = run_wordcount(spark, find_inputs([CORPUS]), tmp_path, config, api=api, tracker=tracker)

    assert read_counts(tmp_path / "counts.csv") == plain_count(corpus_files())
    tags = [f.tag for f in report.files]
    assert all(f.state == "acked" for f in report.files)
    assert all(s.state == "acked" for s in tracker.status_many(tags).values())
    assert set(XorAckDynamoDB.from_config(config).status_many(tags).missing) == set(tags)


@both_apis
def test_wordcount_on_the_bundled_corpus(spark: Any, api: str, config: AckConfig, tmp_path: Path) -> None:
    files = corpus_files()
    assert 20 <= len(files) <= 40
    report = run_wordcount(spark, find_inputs([CORPUS]), tmp_path, config, api=api)

    expected = plain_count(files)
    assert read_counts(tmp_path / "counts.csv") == expected
    assert all(f.state == "acked" and f.attempts == 1 and f.error is None for f in report.files)
    totals = report.totals()
    assert totals["files"] == len(files) and totals["acked"] == len(files) and totals["failed"] == 0
    assert totals["words"] == sum(expected.values()) and totals["distinct_words"] == len(expected)
    assert totals["replays"] == 0
    # One create and one stamp per file (the RDD driver reads each chain before its
    # stamp: it did not create them), and the final BatchGetItem.
    writes = report.requests["requests.UpdateItem"] + report.requests["requests.PutItem"]
    assert writes == 2 * len(files)
    assert totals["dynamodb_requests"] <= (3 if api == "rdd" else 2) * len(files) + 1

    # The chains themselves: every one acked (zero), none left pending.
    statuses = XorAckDynamoDB.from_config(config).status_many(f.tag for f in report.files)
    assert len(statuses) == len(files)
    assert all(s.state == "acked" and s.stamp.acked for s in statuses.values())

    written = json.loads((tmp_path / "report.json").read_text())
    assert written["totals"] == totals
    assert {f["state"] for f in written["files"]} == {"acked"}
    assert not (tmp_path / ".parts" / report.run_id).exists()


@both_apis
def test_failed_files_are_replayed_and_counted_once(
    spark: Any, api: str, config: AckConfig, tmp_path: Path
) -> None:
    files = corpus_files()
    report = run_wordcount(
        spark, find_inputs([CORPUS]), tmp_path, config, api=api, fail_rate=0.2, seed=7, keep_parts=True
    )

    # Every file has dozens of words, so every file met a failure on attempt 1...
    assert all(f.attempts == 2 for f in report.files)
    for f in report.files:
        first, second = f.history
        assert first["state"] == "failed" and "InjectedFailure" in first["reason"]
        assert second["state"] == "acked"
        assert _attempt_and_key(first["tag"]) == (1, _attempt_and_key(second["tag"])[1])
        assert _attempt_and_key(second["tag"])[0] == 2
    # ...and attempt 1's output holds none of their words: it held words of failed
    # files, so it was discarded and the job ran again over the others (none here).
    # The counts equal the plain count exactly.
    parts = tmp_path / ".parts" / report.run_id
    if api == "rdd":
        assert not list(read_csv_parts(parts / "attempt-1"))
    else:
        assert not [p for p in (parts / "_xor_ack").glob("*-a1-*") if p.is_dir()]
    assert read_counts(tmp_path / "counts.csv") == plain_count(files)
    totals = report.totals()
    assert totals["acked"] == len(files) and totals["replays"] == len(files)

    tracker = XorAckDynamoDB.from_config(config)
    first_tags = [f.history[0]["tag"] for f in report.files]
    failed = tracker.status_many(first_tags)
    assert all(s.state == "failed" and not s.stamp.acked for s in failed.values())  # never falsely zero
    assert all(s.state == "acked" for s in tracker.status_many(f.tag for f in report.files).values())


@both_apis
def test_files_that_keep_failing_end_failed(spark: Any, api: str, config: AckConfig, tmp_path: Path) -> None:
    inputs = find_inputs([CORPUS / "psalm-023.txt", CORPUS / "sonnet-018.txt"])
    report = run_wordcount(
        spark, inputs, tmp_path, config, api=api, fail_rate=0.3, fail_attempts=5, max_attempts=2
    )
    assert not report.all_acked
    assert [f.state for f in report.files] == ["failed", "failed"]
    assert all(f.attempts == 2 and "InjectedFailure" in (f.error or "") for f in report.files)
    assert read_counts(tmp_path / "counts.csv") == Counter()  # nothing from failed chains


def _bad_and_good(tmp_path: Path) -> tuple[Path, Path]:
    good = tmp_path / "in" / "good.txt"
    bad = tmp_path / "in" / "bad.txt"
    good.parent.mkdir()
    good.write_text("one two two three three three\n", encoding="utf-8")
    bad.write_bytes(b"caf\xe9 latin-1 bytes, then caf\xc3\xa9\n")
    return good, bad


@both_apis
def test_bad_bytes_are_replaced_and_noted(spark: Any, api: str, config: AckConfig, tmp_path: Path) -> None:
    good, bad = _bad_and_good(tmp_path)
    report = run_wordcount(spark, find_inputs([good.parent]), tmp_path / "out", config, api=api)
    states = {Path(f.path).name: f for f in report.files}
    assert states["good.txt"].state == "acked" and states["good.txt"].note is None
    assert states["bad.txt"].state == "acked" and states["bad.txt"].attempts == 1
    # Spark's reader gives no byte offsets: the DataFrame path says what it knows.
    notes = {"rdd": "bad bytes: 1 invalid UTF-8 sequence(s), first at byte 3", "frame": BAD_BYTES_NOTE}
    assert states["bad.txt"].note == notes[api]
    expected = plain_count_replacing([good, bad])
    assert expected["caf"] == 1 and expected["café"] == 1  # U+FFFD splits the word
    assert read_counts(tmp_path / "out" / "counts.csv") == expected
    assert report.totals()["noted"] == 1
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [f["note"] for f in written["files"] if f["path"].endswith("bad.txt")] == [states["bad.txt"].note]


@both_apis
def test_bad_bytes_fail_their_file_alone_and_are_not_replayed(
    spark: Any, api: str, config: AckConfig, tmp_path: Path
) -> None:
    good, bad = _bad_and_good(tmp_path)
    report = run_wordcount(
        spark, find_inputs([good.parent]), tmp_path / "out", config, api=api, bad_bytes="fail", max_attempts=3
    )
    states = {Path(f.path).name: f for f in report.files}
    assert states["good.txt"].state == "acked"
    assert states["bad.txt"].state == "failed" and states["bad.txt"].attempts == 1  # not replayed
    reasons = {"rdd": "bad bytes: invalid UTF-8 at byte 3 of", "frame": f"bad bytes: invalid UTF-8 in {bad}"}
    assert reasons[api] in (states["bad.txt"].error or "")
    assert read_counts(tmp_path / "out" / "counts.csv") == Counter({"three": 3, "two": 2, "one": 1})


@both_apis
def test_a_file_whose_name_is_not_utf8_is_tracked(
    spark: Any, api: str, config: AckConfig, tmp_path: Path
) -> None:
    """Such a name used to abort the whole job with InvalidTag (tags are UTF-8 str):
    it is now tracked under an escaped key and counted like any file."""
    import os

    folder = tmp_path / "in"
    folder.mkdir()
    raw = os.fsencode(folder) + b"/r\xe9sum\xe9 100%.txt"
    with open(raw, "wb") as handle:
        handle.write(b"alpha beta beta\n")
    (folder / "plain.txt").write_text("beta gamma\n", encoding="utf-8")
    # A "+" in a name with no escape in its URI, and one in a name with an escape.
    (folder / "c+d.txt").write_text("delta\n", encoding="utf-8")
    (folder / "naïve +e.txt").write_text("delta epsilon\n", encoding="utf-8")
    inputs = find_inputs([folder])
    assert len(inputs) == 4
    report = run_wordcount(spark, inputs, tmp_path / "out", config, api=api)
    assert [f.state for f in report.files] == ["acked"] * 4
    names = sorted(Path(f.path).name for f in report.files)
    assert names == ["c+d.txt", "naïve +e.txt", "plain.txt", "r%E9sum%E9 100%25.txt"]
    counted = Counter({"beta": 3, "alpha": 1, "gamma": 1, "delta": 2, "epsilon": 1})
    assert read_counts(tmp_path / "out" / "counts.csv") == counted
    json.loads((tmp_path / "out" / "report.json").read_text())  # valid JSON, valid UTF-8


@both_apis
def test_untracked_job_counts_the_same(spark: Any, api: str, tmp_path: Path) -> None:
    report = run_wordcount(spark, find_inputs([CORPUS]), tmp_path, None, api=api)
    assert read_counts(tmp_path / "counts.csv") == plain_count(corpus_files())
    assert report.totals()["dynamodb_requests"] == 0


@pytest.mark.parametrize("fail_rate", [0.0, 0.2])
def test_the_frame_job_reads_its_counts_back_in_the_driver_or_in_spark_alike(
    spark: Any, config: AckConfig, tmp_path: Path, fail_rate: float
) -> None:
    """One Spark query per attempt, the tracked write: nothing is read back for the
    stamps. The final count is read by the driver from small staged output on a
    directory it sees, and otherwise by a Spark query (output on ``s3://``, Spark
    Connect, or past ``spark.xorack.driverReadBytes``; started ahead while the driver
    stamps when attempt 1 wrote no failure, made after the run otherwise). An attempt
    in which a file fails runs its job again over the other files (at fail rate 0.2
    every file of attempt 1 fails: no file is left, and nothing runs again). The counts
    are exact either way."""
    files = corpus_files()
    queries = {}
    for reader in ("driver", "spark"):
        before = sql_executions(spark)
        with spark_reads_back(spark) if reader == "spark" else contextlib.nullcontext():
            report = run_wordcount(
                spark, find_inputs([CORPUS]), tmp_path / reader, config, fail_rate=fail_rate, seed=7
            )
        queries[reader] = sql_executions(spark) - before
        assert read_counts(tmp_path / reader / "counts.csv") == plain_count(files)
        assert all(f.state == "acked" for f in report.files)
    attempts = 2 if fail_rate else 1
    assert queries == {"driver": attempts, "spark": attempts + 1}


# -- the tracked-RDD API beyond the word count ----------------------------------------


def _key(tracking: Tracking) -> Any:
    prefix = tracking.run_id  # not `tracking` itself: it holds the SparkContext
    return lambda root: f"{prefix}/{root}"


def _letters(text: str) -> list[str]:
    return text.split()


def _explode_on_x(word: str) -> str:
    if word == "x":
        raise ValueError("no x allowed")
    return word


def test_shuffle_merges_anchors_of_many_chains(sc: Any, config: AckConfig, tmp_path: Path) -> None:
    """Words shared by several roots meet in one reduced record anchored to all of them;
    the sink's one stamp per chain per partition completes every chain."""
    roots = ["a b c a", "b c d", "a a a", "q"]
    writer = CsvPartitionWriter(str(tmp_path / "parts"), header=("word", "count"))
    tracking = Tracking(sc, config)
    written: list[int] = []

    def job(started: Any, attempt: int) -> None:
        pairs = started.fan_out(_letters).filter(lambda w: w != "q").map(lambda w: (w, 1))
        written.append(pairs.reduce_by_key(operator.add, 3).sink(writer))

    report = tracking.run(roots, _key(tracking), job)
    assert [o.state for o in report.outcomes] == ["acked"] * 4
    assert written == [4]  # a, b, c, d: "q" was filtered out (and its edge acked)
    rows = {r["word"]: int(r["count"]) for r in read_csv_parts(tmp_path / "parts")}
    assert rows == {"a": 5, "b": 2, "c": 2, "d": 1}
    # One create per root, then one stamp per chain for the whole sink (the driver
    # merges the partitions' XORs).
    counters = report.counters
    assert counters["chains_created"] == 4
    assert counters["stamps"] == 4


def test_record_that_raises_fails_its_chain_only(sc: Any, config: AckConfig, tmp_path: Path) -> None:
    roots = ["a b", "c x d", "e"]
    tracking = Tracking(sc, config)
    writer = CsvPartitionWriter(str(tmp_path / "parts"), header=("word",), to_row=lambda w: (w,))

    def job(started: Any, attempt: int) -> None:
        started.fan_out(_letters).map(_explode_on_x).sink(writer)

    report = tracking.run(roots, _key(tracking), job, max_attempts=2)
    states = [o.state for o in report.outcomes]
    assert states == ["acked", "failed", "acked"]
    bad = report.outcomes[1]
    assert len(bad.attempts) == 2 and all("no x allowed" in (a.reason or "") for a in bad.attempts)
    # The failed chains hold a nonzero stamp: the record that raised never acked its edge.
    statuses = tracking.tracker.status_many(a.tag for a in bad.attempts)
    assert all(s.state == "failed" and not s.stamp.acked for s in statuses.values())


def test_sink_that_raises_fails_its_chains(sc: Any, config: AckConfig) -> None:
    tracking = Tracking(sc, config)

    def broken_writer(index: int, values: list[Any]) -> None:
        raise OSError("disk full")

    def job(started: Any, attempt: int) -> None:
        started.fan_out(_letters).sink(broken_writer)

    report = tracking.run(["a b", "c"], _key(tracking), job, max_attempts=1)
    assert [o.state for o in report.outcomes] == ["failed", "failed"]
    assert all("disk full" in (o.attempts[-1].reason or "") for o in report.outcomes)


def test_duplicate_keys_are_rejected_before_any_request(sc: Any, config: AckConfig) -> None:
    from xor_ack_dynamodb.errors import InvalidConfig

    tracking = Tracking(sc, config)
    with pytest.raises(InvalidConfig):
        tracking.run(["a", "a"], lambda r: r, lambda started, attempt: None)
    assert tracking.requests()["requests"] == 0


# -- the command, in this process (it reuses the active SparkContext) -----------------


def test_command_runs_the_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["wordcount", "--output", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert status == 0
    assert "files acked" in out and "requests per word" in out
    assert read_counts(tmp_path / "counts.csv") == plain_count(corpus_files())
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["totals"]["acked"] == len(corpus_files())


def test_command_exit_status_when_files_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "wordcount",
            str(CORPUS / "psalm-023.txt"),
            "--output",
            str(tmp_path),
            "--quiet",
            "--fail-rate",
            "0.5",
            "--fail-attempts",
            "9",
            "--max-attempts",
            "2",
        ]
    )
    assert status == 1
    assert "not acked" in capsys.readouterr().out


def test_command_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["wordcount", "--fail-rate", "1.5"])
    assert exit_info.value.code == 2
    assert main(["wordcount", "/no/such/file"]) == 2
    assert main(["wordcount", "--api", "rdd", "--remote", "sc://127.0.0.1:1"]) == 2


def test_command_against_a_named_table_and_endpoint(
    moto_server: LocalDynamoDB, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--endpoint-url/--table: no embedded server; the table is created if missing and
    the chains are found in it afterwards (credentials and region from the environment)."""
    table = unique_table("cli")
    inputs = [str(CORPUS / "psalm-023.txt"), str(CORPUS / "sonnet-116.txt")]
    status = main(
        ["wordcount", *inputs, "--endpoint-url", str(moto_server.endpoint_url), "--table", table]
        + ["--output", str(tmp_path), "--quiet"]
    )
    assert status == 0
    assert f"DynamoDB table {table}" in capsys.readouterr().err
    report = json.loads((tmp_path / "report.json").read_text())
    tracker = XorAckDynamoDB.from_config(moto_server.config(table))
    statuses = tracker.status_many(f["tag"] for f in report["files"])
    assert [s.state for s in statuses.values()] == ["acked", "acked"]


def test_command_without_tracking_aborts_on_a_failing_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The contrast: with no tracking, one record that raises fails the whole job."""
    status = main(
        ["wordcount", str(CORPUS / "psalm-023.txt"), "--output", str(tmp_path), "--quiet"]
        + ["--no-tracking", "--fail-rate", "0.5"]
    )
    assert status == 1
    assert "the Spark job failed" in capsys.readouterr().err
    assert not (tmp_path / "counts.csv").exists()


class _SlowFirstAttempt:
    """A sink writer that, on attempt 1, outlives the chains' ttl before writing."""

    def __init__(self, attempt: int, seconds: float) -> None:
        self.attempt = attempt
        self.seconds = seconds

    def __call__(self, index: int, values: list[Any]) -> None:
        if self.attempt == 1:
            import time

            time.sleep(self.seconds)


def test_expired_chains_are_replayed(sc: Any, moto_server: LocalDynamoDB) -> None:
    # A skew margin wider than the job: the chains, created by the driver as the job
    # starts, read pending (not expired) when it ends, however slow Spark starts.
    config = moto_server.config(unique_table("expiry"), ttl_seconds=3, skew_seconds=30)
    XorAckDynamoDB.from_config(config).create_table()
    # No heartbeat: with one, the chains would outlive the slow sink (test_spark_heartbeat).
    tracking = Tracking(sc, config, heartbeat=False)

    def job(started: Any, attempt: int) -> None:
        started.fan_out(_letters).sink(_SlowFirstAttempt(attempt, 4.5))

    report = tracking.run(["a b", "c d e"], _key(tracking), job, max_attempts=3)
    assert [o.state for o in report.outcomes] == ["acked", "acked"]
    for outcome in report.outcomes:
        # The sink's stamps came after the deadline (refused, not applied); the chain
        # still reads pending within the clock-skew margin, so the driver fails it
        # (no late write may ack it), and the root is replayed.
        first = outcome.attempts[0]
        assert (first.state, first.reason) == ("failed", "still pending when its job ended")
        assert first.tag != outcome.attempts[-1].tag
    assert report.counters["skipped"] >= 2


class _DriverClock:
    """The driver tracker's clock: real time plus an offset the job sets (so the driver
    sees the chains it created time out)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        import time

        return time.time() + self.offset


def test_a_root_that_reads_expired_is_replayed(sc: Any, moto_server: LocalDynamoDB) -> None:
    """Issue 23: the replay choice for roots whose chain reads ``expired`` (docs/expiry.md,
    "Replaying": expired is lost work, replayed up to the limit of attempts). Attempt 1
    ends past deadline + skew on the driver's clock (``skew`` 1 s; the clock moved, no
    sleep): the sink's stamps are refused (``TagExpired``) and settle reads the chains
    ``expired`` (not pending: nothing fails them). Attempt 2, on the real clock again,
    replays them under new tags and acks them. Without the replay of expired roots the
    run would end with both roots ``expired``."""
    config = moto_server.config(unique_table("expired"), ttl_seconds=60, skew_seconds=1)
    XorAckDynamoDB.from_config(config).create_table()
    clock = _DriverClock()
    driver = XorAckDynamoDB.from_config(config, clock=clock)
    tracking = Tracking(sc, config, heartbeat=False, tracker=driver)
    roots, key = ["a b", "c d e"], _key(tracking)
    reader = XorAckDynamoDB.from_config(config)  # on the real clock

    def job(started: Any, attempt: int) -> None:
        if attempt == 1:  # once the driver created the chains, it ends past deadline + skew
            tags = [tracking.tag(key(root), 1) for root in roots]
            deadline = time.monotonic() + 60
            while len(reader.status_many(tags)) < len(tags) and time.monotonic() < deadline:
                time.sleep(0.05)
        clock.offset = 60 + 1 + 5 if attempt == 1 else 0.0
        started.fan_out(_letters).sink(lambda index, values: None)

    report = tracking.run(roots, key, job, max_attempts=2)
    assert [o.state for o in report.outcomes] == ["acked", "acked"]
    for outcome in report.outcomes:
        assert [a.state for a in outcome.attempts] == ["expired", "acked"]
        assert outcome.attempts[0].tag != outcome.attempts[1].tag
    assert report.counters["skipped"] >= 2  # attempt 1's sink stamps: refused, not applied


def test_s3_sink_writes_then_acks(sc: Any, config: AckConfig, moto_server: LocalDynamoDB) -> None:
    """The sink writing to S3 (the moto server serves S3 too): one object per partition,
    read back whole; chains acked after the puts."""
    from xor_ack_dynamodb.spark import S3PartitionWriter, read_s3_parts

    s3 = boto3.session.Session(region_name="us-east-1").client("s3", endpoint_url=moto_server.endpoint_url)
    bucket = unique_table("bucket").lower()
    s3.create_bucket(Bucket=bucket)
    tracking = Tracking(sc, config)
    writer = S3PartitionWriter(bucket, "run/counts", ("word", "count"), endpoint_url=moto_server.endpoint_url)

    def job(started: Any, attempt: int) -> None:
        started.fan_out(_letters).map(lambda w: (w, 1)).reduce_by_key(operator.add, 2).sink(writer)

    report = tracking.run(["a b a", "b c"], _key(tracking), job)
    assert [o.state for o in report.outcomes] == ["acked", "acked"]
    rows = {r["word"]: int(r["count"]) for r in read_s3_parts(s3, bucket, "run/counts")}
    assert rows == {"a": 2, "b": 2, "c": 1}


def test_command_writes_to_s3(
    moto_server: LocalDynamoDB, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--output s3://bucket/prefix: partition files, counts.csv and report.json are S3
    objects (the moto server serves S3 too); the parts are removed afterwards."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", str(moto_server.endpoint_url))
    s3 = boto3.session.Session(region_name="us-east-1").client("s3", endpoint_url=moto_server.endpoint_url)
    bucket = unique_table("out").lower()
    s3.create_bucket(Bucket=bucket)
    inputs = [str(CORPUS / "psalm-023.txt"), str(CORPUS / "ecclesiastes-03.txt")]
    status = main(
        ["wordcount", *inputs, "--endpoint-url", str(moto_server.endpoint_url), "--table", unique_table("s3")]
        + ["--output", f"s3://{bucket}/wc", "--quiet", "--fail-rate", "0.05"]
    )
    assert status == 0
    assert f"s3://{bucket}/wc/counts.csv" in capsys.readouterr().out
    body = s3.get_object(Bucket=bucket, Key="wc/counts.csv")["Body"].read().decode("utf-8")
    rows = dict(line.split(",") for line in body.splitlines()[1:])
    assert {w: int(c) for w, c in rows.items()} == plain_count(Path(p) for p in inputs)
    report = json.loads(s3.get_object(Bucket=bucket, Key="wc/report.json")["Body"].read())
    assert report["totals"]["acked"] == 2 and report["totals"]["replays"] == 2
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert sorted(keys) == ["wc/counts.csv", "wc/report.json"]

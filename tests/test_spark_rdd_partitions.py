"""Tracked RDDs without anchors (issue 38): a root is acked because the job that wrote its
output committed and none of its records failed; failures and notes travel per
partition as sets; output holding records of failed roots is discarded and the job run
again over the other roots, in the same attempt, before any stamp.

And the RDD word count's shuffles are sized from its input, not to one partition: on two
cores the old default (half the default parallelism, 1 to 8) gave the reduce stage and
the final count one task each, which ran a 25.6M-word reduce on one core for 35.7 s
(issue 32). Real Spark (local[2,4]), the moto server; each Spark job of the run is read
back from Spark's status tracker."""

from __future__ import annotations

import dataclasses
import operator
import secrets
import sys
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from pyspark import cloudpickle

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.jobs.wordcount.job import run_wordcount, tokenize
from xor_ack_dynamodb.spark import CsvPartitionWriter, Tracking, read_csv_parts
from xor_ack_dynamodb.spark.outcomes import Attempt
from xor_ack_dynamodb.spark.rdd.executor import Carry, Ledger, Raised, RunSpec, combine
from xor_ack_dynamodb.spark.rdd.tracked import MIXED, Pass, Sunk

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

TEXTS = [f"file {i} says hello world and counts {'word ' * i}again\nand again {i}\n" for i in range(6)]


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("rdd-parts"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


@pytest.fixture
def sc(spark: Any) -> Any:
    return spark.sparkContext


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    paths = []
    for i, text in enumerate(TEXTS):
        path = tmp_path / "in" / f"{i}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def _job_ids(sc: Any) -> set[int]:
    return set(sc.statusTracker().getJobIdsForGroup(None))


def stage_tasks(sc: Any, before: set[int]) -> list[list[int]]:
    """Per Spark job started since ``before`` (in order), its stages' task counts (map
    stages first: stage ids grow along a job's lineage). Jobs without a stage are left
    out: a tracked run ends with one over no partitions, which only carries its summary
    to Spark's UI (:mod:`xor_ack_dynamodb.spark.metrics`)."""
    tracker = sc.statusTracker()
    jobs = []
    for job_id in sorted(_job_ids(sc) - before):
        info = tracker.getJobInfo(job_id)
        assert info is not None, f"Spark forgot job {job_id}"
        if not info.stageIds:
            continue
        stages = [tracker.getStageInfo(s) for s in sorted(info.stageIds)]
        assert all(s is not None for s in stages), f"Spark forgot a stage of job {job_id}"
        jobs.append([s.numTasks for s in stages])
    return jobs


def _expected(paths: list[Path]) -> Counter[str]:
    return Counter(w for p in paths for w in tokenize(p.read_text(encoding="utf-8")))


@pytest.mark.parametrize("tracked", [True, False], ids=["tracked", "untracked"])
def test_rdd_shuffles_get_the_inputs_partitions(
    spark: Any, config: AckConfig, files: list[Path], tmp_path: Path, tracked: bool
) -> None:
    """Six files on two cores: the job's map side has four partitions (twice the
    default parallelism), and so do its reduce stage and the final count's, each a
    job of a map stage and a reduce stage."""
    sc = spark.sparkContext
    slices = min(len(files), 2 * sc.defaultParallelism)
    assert slices > 1  # the premise: local[2,4]
    before = _job_ids(sc)
    report = run_wordcount(sc, files, tmp_path / "out", config if tracked else None, api="rdd")
    assert report.all_acked
    assert report.counts == _expected(files)
    jobs = stage_tasks(sc, before)
    # The word count (read + count, then sum per (file, word) and write) and the final
    # count (read the acked parts, then sum per word): a map stage and a reduce each.
    assert jobs == [[slices, slices], [slices, slices]], jobs


def test_rdd_partitions_option_sizes_both_shuffles(
    spark: Any, config: AckConfig, files: list[Path], tmp_path: Path
) -> None:
    """``partitions=`` (``--partitions``) still sets the reduce partitions."""
    sc = spark.sparkContext
    slices = min(len(files), 2 * sc.defaultParallelism)
    before = _job_ids(sc)
    report = run_wordcount(sc, files, tmp_path / "out", config, api="rdd", partitions=3)
    assert report.all_acked
    assert report.counts == _expected(files)
    assert stage_tasks(sc, before) == [[slices, 3], [3, 3]]


# -- no anchors: what runs in the tasks -----------------------------------------------


def test_a_ledger_flushed_twice_carries_the_same_sets() -> None:
    """What a retried task does, step by step: the same ledger flushed twice emits the
    same carrier (sets: the first reason and note per root, no counts, no XOR), so the
    driver, handed one result per partition, learns the same whatever ran twice."""
    spec = RunSpec(1)
    carried = []
    for _ in range(2):  # a map partition failing one root twice and noting another
        step = Ledger(spec, "1-map", 0)
        step.fail("t1", ValueError("bad record"))
        step.fail("t1", ValueError("second reason, not kept"))
        step.note("t2", "odd line")
        step.fail(None, KeyError("a record of several roots"))
        carried.append(step.flush())
    assert carried[0] == carried[1] == [(Carry("1-map", 0), None)]
    carry = carried[0][0][0]
    assert carry.failed == {"t1": "ValueError('bad record')", None: "KeyError('a record of several roots')"}
    assert carry.notes == {"t2": "odd line"}
    # The same shuffle partition in every process (no per-process string hashing).
    assert hash(Carry("1-map", 0)) == zlib.crc32(b"1-map/0")
    assert Carry("1-map", 0) != ("1-map", 0)
    assert Ledger(spec, "2-map", 0).flush() == []  # nothing to say: no carrier


def test_combined_records_keep_a_root_only_when_all_their_values_share_it() -> None:
    assert combine(operator.add, (1, "t1"), (2, "t1")) == (3, "t1")
    assert combine(operator.add, (1, "t1"), (2, "t2")) == (3, None)
    assert combine(operator.add, (3, None), (2, "t1")) == (5, None)
    assert combine(operator.add, (3, "t1"), (2, None)) == (5, None)
    raised = combine(operator.truediv, (1, "t1"), (0, "t1"))
    assert raised == (Raised("ZeroDivisionError('division by zero')"), "t1")
    assert combine(operator.add, raised, (5, "t1")) == raised  # fn is not called again
    assert combine(operator.add, (5, "t2"), raised)[1] is None  # of several roots now


def _acker(
    calls: list[tuple[str, dict[str, int], dict[str, str], dict[str, str]]],
    known: dict[str, Attempt],
    unacked: frozenset[str] = frozenset(),
) -> Any:
    """An acker that records its calls and, as the driver's does, the chains its stamps
    acked (all but ``unacked``) into ``known``."""

    def ack(
        step: str, stamps: dict[str, int], failures: dict[str, str], notes: dict[str, str]
    ) -> Counter[str]:
        calls.append((step, stamps, failures, notes))
        known.update({t: Attempt(t, "acked") for t in stamps if t not in unacked})
        return Counter()

    return ack


def test_a_pass_stamps_only_output_without_records_of_failed_roots() -> None:
    """The driver's decision after a sink (no Spark): stamp the roots that did not fail
    when no written record is a failed root's; else ask for the job again, or (a pass
    that cannot be run again) fail every root. A stamp that does not ack, under output
    of several roots (or with records of its root written): the job again over the
    roots that acked, after the stamps."""
    stamps = {"t1": 11, "t2": 22, "t3": 33}
    clean = Sunk(2, 5, {"t1", "t3"}, False, {"t2": "ValueError('x')"}, {"t3": "odd", None: "all"})
    calls: list[Any] = []
    known: dict[str, Attempt] = {}
    run = Pass(stamps, _acker(calls, known), known=known)
    run("9-sink", print, clean)
    assert run.again is None and not run.after_ack
    assert calls == [
        ("9-sink", {"t1": 11, "t3": 33}, {"t2": "ValueError('x')"}, {"t1": "all", "t2": "all", "t3": "odd"})
    ]

    for mixed in (dataclasses.replace(clean, cross=True), dataclasses.replace(clean, tags={"t1", "t2"})):
        calls = []
        run = Pass(stamps, _acker(calls, {}))
        run("9-sink", print, mixed)
        assert calls == [] and run.again == ({"t2"}, print, 2)
        run = Pass(stamps, _acker(calls, {}), rerun=False)
        run("9-sink", print, mixed)
        assert calls == [("9-sink", {}, {"t1": MIXED, "t2": "ValueError('x')", "t3": MIXED}, run.notes)]

    calls = []  # a failure of a record of several roots: every root's
    Pass(stamps, _acker(calls, {}))("9-sink", print, Sunk(1, 0, set(), False, {None: "E()"}, {}))
    assert calls == [("9-sink", {}, {"t1": "E()", "t2": "E()", "t3": "E()"}, {})]

    whole = Sunk(2, 5, {"t1", "t3"}, False, {}, {})
    for sunk, again in ((whole, None), (dataclasses.replace(whole, cross=True), {"t2"})):
        known = {}  # t2's stamp does not ack (its chain failed behind the run's back)
        run = Pass(stamps, _acker([], known, frozenset({"t2"})), known=known)
        run("9-sink", print, sunk)
        assert (run.again, run.after_ack) == (((again, print, 2), True) if again else (None, False))
    known = {}
    run = Pass(stamps, _acker(calls := [], known, frozenset({"t2"})), known=known, rerun=False)
    run("9-sink", print, dataclasses.replace(whole, cross=True))
    assert run.again is None and len(calls) == 1  # a pass that cannot run again: as before
    calls = []
    run = Pass(stamps, _acker(calls, {}), acked=True)  # the run again after the stamps: writes only
    run("9-sink", print, whole)
    assert calls == [] and run.again is None
    run("9-sink", print, dataclasses.replace(whole, failed={"t3": "E()"}))
    assert calls == [] and run.again == ({"t3"}, print, 2)


# -- no anchors: runs ---------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """Splits ``"<id>: words"`` roots into words, leaving a mark per root read
    (``<attempt>-<id>-<random>``: reads are counted per attempt)."""

    marks: str
    attempt: int

    def __call__(self, root: str) -> list[str]:
        name, _, text = root.partition(": ")
        Path(self.marks, f"{self.attempt}-{name}-{secrets.token_hex(4)}").touch()
        return text.split()


@dataclass(frozen=True)
class NoXOnFirst:
    attempt: int

    def __call__(self, word: str) -> str:
        if word == "x" and self.attempt == 1:
            raise ValueError("no x on attempt 1")
        return word


def _reads(marks: Path) -> Counter[str]:
    return Counter(p.name.rsplit("-", 1)[0] for p in marks.iterdir())


@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_a_failed_root_in_cross_root_output_reruns_the_job_over_the_others(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path, mode: str
) -> None:
    """Words are summed across roots; root r2 fails on attempt 1 (a word raises) while
    its other words sit in shared sums: attempt 1's output is discarded and the job run
    again over r1, r3, r4 only (their input read again, r2's not), then those are
    stamped once; r2 is failed with its reason and replayed alone on attempt 2. Each
    attempt's output holds exactly its acked roots' words, so their sum is exact."""
    config = dataclasses.replace(moto_server.config(unique_table("rerun")), mode=mode)
    XorAckDynamoDB.from_config(config).create_table()
    marks = tmp_path / "marks"
    marks.mkdir()
    roots = ["r1: a b c a", "r2: b c x d", "r3: a a a", "r4: q"]
    tracking = Tracking(spark.sparkContext, config)

    def job(started: Any, attempt: int) -> int:
        writer = CsvPartitionWriter(str(tmp_path / f"a{attempt}"), header=("word", "count"))
        words = started.fan_out(Reading(str(marks), attempt)).map(NoXOnFirst(attempt))
        pairs = words.filter(lambda w: w != "q").map(lambda w: (w, 1))
        return int(pairs.reduce_by_key(operator.add, 3).sink(writer))

    report = tracking.run(roots, lambda r: r.split(":")[0], job, max_attempts=2)
    assert [[a.state for a in o.attempts] for o in report.outcomes] == [
        ["acked"],
        ["failed", "acked"],
        ["acked"],
        ["acked"],
    ]
    assert "no x on attempt 1" in (report.outcomes[1].attempts[0].reason or "")
    assert _reads(marks) == {"1-r1": 2, "1-r2": 1, "1-r3": 2, "1-r4": 2, "2-r2": 1}
    first = {r["word"]: int(r["count"]) for r in read_csv_parts(tmp_path / "a1")}
    second = {r["word"]: int(r["count"]) for r in read_csv_parts(tmp_path / "a2")}
    assert first == {"a": 5, "b": 1, "c": 1}
    assert second == {"b": 1, "c": 1, "x": 1, "d": 1}
    assert report.counters["reruns"] == 1
    assert report.counters["stamps"] == 4  # one per acked root, none for the discarded output
    statuses = tracking.tracker.status_many(a.tag for o in report.outcomes for a in o.attempts)
    for outcome in report.outcomes:
        for attempt in outcome.attempts:
            status = statuses[attempt.tag]
            # The create, then the stamp or the fail (a completing sum stamp is an ADD and
            # the write that stores acked).
            acked = attempt.state == "acked"
            assert status.state == attempt.state and status.version == (3 if acked and mode == "sum" else 2)
            assert status.value.acked == (attempt.state == "acked")


class TakenBeforeStamps(XorAckDynamoDB):
    """The real tracker, but chain ``taken`` is failed by someone else just before its
    stamp is sent (between the sink's commit and the driver's stamps), once."""

    taken = ""

    def stamp(self, tag: str, *args: Any, **kwargs: Any) -> Any:
        if tag == self.taken:
            type(self).taken = ""
            self.fail(tag, "taken")
        return super().stamp(tag, *args, **kwargs)


@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_a_stamp_that_does_not_ack_under_cross_root_output_reruns_over_the_acked_roots(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path, mode: str
) -> None:
    """Words are summed across roots; all records are written and the sink commits,
    but r2's chain is failed behind the run's back before its stamp: r1 and r3 ack,
    r2's stamp does not. Attempt 1's output still holds r2's words in shared sums, so
    it is discarded and the job runs again over r1 and r3, writing only (no second
    stamp); r2 is replayed on attempt 2. The attempts' outputs sum to the plain count
    once: r2's words are not counted twice."""
    config = dataclasses.replace(moto_server.config(unique_table("torn")), mode=mode)
    XorAckDynamoDB.from_config(config).create_table()
    marks = tmp_path / "marks"
    marks.mkdir()
    roots = ["r1: a b c a", "r2: b c d", "r3: a a"]
    tracker = TakenBeforeStamps.from_config(config)
    tracking = Tracking(spark.sparkContext, config, tracker=tracker)
    TakenBeforeStamps.taken = tracking.tag("r2", 1)

    def job(started: Any, attempt: int) -> int:
        writer = CsvPartitionWriter(str(tmp_path / f"a{attempt}"), header=("word", "count"))
        pairs = started.fan_out(Reading(str(marks), attempt)).map(lambda w: (w, 1))
        return int(pairs.reduce_by_key(operator.add, 2).sink(writer))

    report = tracking.run(roots, lambda r: r.split(":")[0], job, max_attempts=2)
    assert [[(a.state, a.reason) for a in o.attempts] for o in report.outcomes] == [
        [("acked", None)],
        [("failed", "taken"), ("acked", None)],
        [("acked", None)],
    ]
    assert _reads(marks) == {"1-r1": 2, "1-r2": 1, "1-r3": 2, "2-r2": 1}
    first = {r["word"]: int(r["count"]) for r in read_csv_parts(tmp_path / "a1")}
    second = {r["word"]: int(r["count"]) for r in read_csv_parts(tmp_path / "a2")}
    assert first == {"a": 4, "b": 1, "c": 1}
    assert second == {"b": 1, "c": 1, "d": 1}
    assert Counter(first) + Counter(second) == Counter("a b c a b c d a a".split())
    assert report.counters["reruns"] == 1
    assert report.counters["stamps"] == 3  # r1 and r3 once, r2 on attempt 2; none on the rerun


@dataclass(frozen=True)
class ChangedOnSecondRead:
    """Reads like :class:`Reading`, but root ``r1`` raises when it is read a second time
    in an attempt (its input changed during the run)."""

    marks: str
    attempt: int

    def __call__(self, root: str) -> list[str]:
        if root.startswith("r1:") and any(Path(self.marks).glob(f"{self.attempt}-r1-*")):
            raise ValueError("r1 changed")
        return Reading(self.marks, self.attempt)(root)


def test_an_acked_root_failing_in_the_run_after_the_stamps_ends_it_with_restaged_apart(
    spark: Any, moto_server: LocalDynamoDB, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/spark.md, RDDs: r2's stamp does not ack under output of several roots, so the
    job runs again over r1 and r3 (acked); r1 now fails there: RestagedApart (the
    attempt's error, logged), the
    write's partitions written again empty (nothing of it kept), the acks stand."""
    from xor_ack_dynamodb.spark.output import RestagedApart

    config = moto_server.config(unique_table("torn-again"))
    XorAckDynamoDB.from_config(config).create_table()
    marks = tmp_path / "marks"
    marks.mkdir()
    tracking = Tracking(spark.sparkContext, config, tracker=TakenBeforeStamps.from_config(config))
    TakenBeforeStamps.taken = tracking.tag("r2", 1)

    def job(started: Any, attempt: int) -> int:
        writer = CsvPartitionWriter(str(tmp_path / f"a{attempt}"), header=("word", "count"))
        pairs = started.fan_out(ChangedOnSecondRead(str(marks), attempt)).map(lambda w: (w, 1))
        return int(pairs.reduce_by_key(operator.add, 2).sink(writer))

    with caplog.at_level("WARNING", logger="xor_ack_dynamodb.spark"):
        report = tracking.run(["r1: a b", "r2: b c", "r3: a"], lambda r: r.split(":")[0], job, max_attempts=1)
    assert any(RestagedApart.__name__ in r.getMessage() and "/r1" in r.getMessage() for r in caplog.records)
    assert [o.state for o in report.outcomes] == ["acked", "failed", "acked"]
    assert list(read_csv_parts(tmp_path / "a1")) == []
    statuses = tracking.tracker.status_many([tracking.tag(k, 1) for k in ("r1", "r2", "r3")])
    assert [statuses[tracking.tag(k, 1)].state for k in ("r1", "r2", "r3")] == ["acked", "failed", "acked"]


def test_a_failed_root_without_written_records_needs_no_rerun(
    sc: Any, config: AckConfig, tmp_path: Path
) -> None:
    """A root whose records all failed, in output of single roots: nothing written is
    its, so the others are stamped at once; a root with a record written beside its
    failed one (no shuffle) makes the job run again without it."""
    tracking = Tracking(sc, config)
    marks = tmp_path / "marks"
    marks.mkdir()

    def job(started: Any, attempt: int) -> None:
        writer = CsvPartitionWriter(str(tmp_path / "out"), header=("word",), to_row=lambda w: (w,))
        started.fan_out(Reading(str(marks), attempt)).map(NoXOnFirst(attempt)).sink(writer)

    report = tracking.run(["r1: a b", "r2: x", "r3: c"], lambda r: r[:2], job, max_attempts=1)
    assert [o.state for o in report.outcomes] == ["acked", "failed", "acked"]
    assert report.counters["reruns"] == 0 and _reads(marks) == {"1-r1": 1, "1-r2": 1, "1-r3": 1}
    assert sorted(r["word"] for r in read_csv_parts(tmp_path / "out")) == ["a", "b", "c"]

    report = Tracking(sc, config).run(["r1: a b", "r2: x y", "r3: c"], lambda r: r[:2], job, max_attempts=1)
    assert [o.state for o in report.outcomes] == ["acked", "failed", "acked"]
    assert report.counters["reruns"] == 1
    assert sorted(r["word"] for r in read_csv_parts(tmp_path / "out")) == ["a", "b", "c"]  # no "y"


def _refuse(a: Any, b: Any) -> Any:
    raise ArithmeticError("cannot combine")


def test_a_reduce_function_that_raises_fails_the_roots_it_combined(
    sc: Any, config: AckConfig, tmp_path: Path
) -> None:
    """Within one root, the root fails; across roots, nothing says which roots the
    record stood for: every root of the job fails (and would be replayed)."""
    writer = CsvPartitionWriter(str(tmp_path / "out"), header=("word", "count"))

    def job(started: Any, attempt: int) -> None:
        pairs = started.fan_out(lambda r: r.split(": ")[1].split()).map(lambda w: (w, 1))
        pairs.reduce_by_key(_refuse, 2).sink(writer)

    report = Tracking(sc, config).run(["r1: b b", "r2: c"], lambda r: r[:2], job, max_attempts=1)
    assert [o.state for o in report.outcomes] == ["failed", "acked"]
    assert "cannot combine" in (report.outcomes[0].attempts[0].reason or "")
    assert {r["word"]: r["count"] for r in read_csv_parts(tmp_path / "out")} == {"c": "1"}

    report = Tracking(sc, config).run(["r1: a", "r2: a", "r3: z"], lambda r: r[:2], job, max_attempts=1)
    assert [o.state for o in report.outcomes] == ["failed"] * 3
    assert all("cannot combine" in (o.attempts[0].reason or "") for o in report.outcomes)
    assert list(read_csv_parts(tmp_path / "out")) == []  # discarded

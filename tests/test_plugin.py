"""The pytest plugin, used as a user would: a throwaway project with no conftest, whose
tests use only the plugin's fixtures, run by pytest in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from xor_ack_dynamodb import Stamp, new_stamp, xor

USER_TESTS = '''
import pickle

import boto3
import pytest

from xor_ack_dynamodb import MemoryAck, XorAckDynamoDB, new_stamp, xor
from xor_ack_dynamodb.errors import TagExpired, TagNotFound


def process_file(ack, tag, words):
    """The user's pipeline: one chain per file, one edge per word."""
    edges = [new_stamp() for _ in words]
    ack.create(tag, xor(*edges) if len(edges) > 1 else edges[0])
    for word, edge in zip(words, edges):
        ack.stamp(tag, edge, op_id=f"{tag}/{word}")
        ack.stamp(tag, edge, op_id=f"{tag}/{word}")  # a redelivery: applied once
    return ack.status(tag)


def test_pipeline_on_dynamodb(xor_ack):
    assert isinstance(xor_ack, XorAckDynamoDB)
    assert process_file(xor_ack, "file-1", ["a", "b", "c"]).state == "acked"
    assert xor_ack.stats.events["duplicates"] == 3
    with pytest.raises(TagNotFound):
        xor_ack.status("file-2")


def test_the_table_is_real_moto(xor_ack):
    # Any client made in the test reaches the same in-process DynamoDB.
    tables = boto3.client("dynamodb").list_tables()["TableNames"]
    assert xor_ack.table in tables


def test_each_test_gets_a_fresh_table(xor_ack):
    assert xor_ack.status_many(["file-1"]) == {}


def test_expiry_with_a_clock(xor_ack_factory):
    now = [1_000_000.0]
    ack = xor_ack_factory(clock=lambda: now[0], ttl=60)
    ack.create("slow", new_stamp())
    now[0] += 61
    with pytest.raises(TagExpired):  # a writer refuses once the deadline has passed
        ack.stamp("slow", new_stamp())
    assert ack.status("slow").state == "pending"  # a reader waits out the 5 s skew margin
    now[0] += 5
    assert ack.status("slow").state == "expired"
    with pytest.raises(TagExpired):
        ack.stamp("slow", new_stamp())


def test_pipeline_in_memory(memory_ack):
    assert isinstance(memory_ack, MemoryAck)
    assert process_file(memory_ack, "file-1", ["a", "b"]).state == "acked"


def test_config_for_other_processes(xor_ack_config):
    config = pickle.loads(pickle.dumps(xor_ack_config))
    assert config.endpoint_url.startswith("http://127.0.0.1:")
    assert process_file(XorAckDynamoDB.from_config(config), "file-9", ["x", "y"]).state == "acked"
'''

WRONG_TEST = """
from xor_ack_dynamodb import new_stamp


def test_deliberately_wrong(xor_ack):
    xor_ack.create("file-1", new_stamp())
    assert xor_ack.status("file-1").state == "acked"  # it is pending: must fail
"""


DOCS = Path(__file__).resolve().parent.parent / "docs" / "testing.md"


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTEST_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_throwaway_project_uses_only_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "test_user_pipeline.py").write_text(textwrap.dedent(USER_TESTS))
    (tmp_path / "test_wrong.py").write_text(textwrap.dedent(WRONG_TEST))
    assert not list(tmp_path.glob("conftest.py"))

    # (docs/testing.md's examples run in tests/test_docs_examples.py, the same way.)
    passing = _pytest(tmp_path, "test_user_pipeline.py")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "6 passed" in passing.stdout

    # The fixtures really run: a wrong assertion about the chain fails...
    wrong = _pytest(tmp_path, "test_wrong.py")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "1 failed" in wrong.stdout and "assert 'pending' == 'acked'" in wrong.stdout

    # ...and they come from the plugin: without it, pytest does not know them.
    without = _pytest(tmp_path, "-p", "no:xor_ack_dynamodb", "test_user_pipeline.py")
    assert without.returncode == 1
    assert "fixture 'xor_ack' not found" in without.stdout


# -- the fixtures under threads ----------------------------------------------------------


def _in_threads(count: int, work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(i)`` in ``count`` threads released together, with the GIL switching
    every 10 µs so that moto's request handling interleaves as it would under load.
    Returns what the threads raised."""
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            failures.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert not any(thread.is_alive() for thread in threads)
    return failures


THREADS = 8
CHILDREN = 3


def test_xor_ack_is_atomic_under_threads(xor_ack: Any, xor_ack_factory: Callable[..., Any]) -> None:
    """8 threads stamp distinct children of one chain, each through its own tracker from
    the fixtures (its own cache, so every stamp is a read and a conditional write that
    can race): the chain ends acked, exactly one stamp saw it acked, and every stamp was
    applied once (the version counts them). In-process moto checks a condition and
    writes without a lock; without the fixture's serialization this ends pending."""
    root = new_stamp()
    children = [[new_stamp() for _ in range(CHILDREN)] for _ in range(THREADS)]
    xor_ack.create("chain", root)
    xor_ack.stamp("chain", xor(root, *(c for row in children for c in row)))
    trackers = [xor_ack] + [xor_ack_factory(cache_size=0) for _ in range(THREADS - 1)]
    results: list[Stamp] = []

    def work(i: int) -> None:
        for n, child in enumerate(children[i]):
            results.append(trackers[i].stamp("chain", child, op_id=f"t{i}/c{n}"))

    assert _in_threads(THREADS, work) == []
    assert len(results) == THREADS * CHILDREN
    status = xor_ack.status("chain")
    assert (status.state, status.stamp) == ("acked", bytes(16))
    assert status.version == 2 + THREADS * CHILDREN
    assert sum(result.acked for result in results) == 1


def test_every_client_in_the_test_is_atomic(xor_ack: Any) -> None:
    """Not only the fixture's client: plain boto3 clients made by the test's own threads
    (one each) doing conditional increments lose no successful write."""
    client = boto3.client("dynamodb")
    key = {xor_ack.partition_key: {"S": "counter"}}
    client.put_item(TableName=xor_ack.table, Item={**key, "v": {"N": "0"}})
    wins: list[int] = []

    def work(_: int) -> None:
        mine = boto3.session.Session().client("dynamodb")
        for _ in range(10):
            seen = mine.get_item(TableName=xor_ack.table, Key=key, ConsistentRead=True)["Item"]["v"]["N"]
            try:
                mine.update_item(
                    TableName=xor_ack.table,
                    Key=key,
                    UpdateExpression="SET v = :new",
                    ConditionExpression="v = :old",
                    ExpressionAttributeValues={":new": {"N": str(int(seen) + 1)}, ":old": {"N": seen}},
                )
                wins.append(1)
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "ConditionalCheckFailedException"

    assert _in_threads(THREADS, work) == []
    final = int(client.get_item(TableName=xor_ack.table, Key=key, ConsistentRead=True)["Item"]["v"]["N"])
    assert len(wins) >= 10
    assert final == len(wins)  # no successful conditional write was lost

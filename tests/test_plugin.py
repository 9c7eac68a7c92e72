"""The pytest plugin, used as a user would: a throwaway project with no conftest, whose
tests use only the plugin's fixtures, run by pytest in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

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
    assert ack.status("slow").state == "expired"
    with pytest.raises(TagExpired):
        ack.stamp("slow", new_stamp())


def test_pipeline_in_memory(memory_ack):
    assert isinstance(memory_ack, MemoryAck)
    assert process_file(memory_ack, "file-1", ["a", "b"]).state == "acked"


def test_config_for_other_processes(xor_ack_config):
    config = pickle.loads(pickle.dumps(xor_ack_config))
    assert config.endpoint_url.startswith("http://127.0.0.1:")
    assert process_file(config.connect(), "file-9", ["x", "y"]).state == "acked"
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

    # The example in docs/testing.md, as written there.
    match = re.search(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    assert match is not None
    (tmp_path / "test_docs_example.py").write_text(match.group(1))

    passing = _pytest(tmp_path, "test_user_pipeline.py", "test_docs_example.py")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "10 passed" in passing.stdout

    # The fixtures really run: a wrong assertion about the chain fails...
    wrong = _pytest(tmp_path, "test_wrong.py")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "1 failed" in wrong.stdout and "assert 'pending' == 'acked'" in wrong.stdout

    # ...and they come from the plugin: without it, pytest does not know them.
    without = _pytest(tmp_path, "-p", "no:xor_ack_dynamodb", "test_user_pipeline.py")
    assert without.returncode == 1
    assert "fixture 'xor_ack' not found" in without.stdout

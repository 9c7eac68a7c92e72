"""The operator CLI, run as a user runs it: a subprocess talking HTTP to a moto server."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB, new_stamp, xor

pytestmark = pytest.mark.server

SECRET = "s3cr3t-VALUE-that-must-never-print"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "XOR_ACK_"))}
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_REGION="us-east-1",
        COLUMNS="200",
    )
    env.update(extra)
    return env


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``xor-ack ARGS`` in a fresh interpreter, as a user would run it."""
    proc = subprocess.run(
        [sys.executable, "-m", "xor_ack_dynamodb", *args],
        capture_output=True,
        text=True,
        env=env or _env(),
        timeout=120,
    )
    # Whatever happens: no traceback, never the secret.
    assert "Traceback" not in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    return proc


def one_error_line(proc: subprocess.CompletedProcess[str], kind: str) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("xor-ack: error:")]
    assert len(errors) == 1, proc.stderr
    assert f"error: {kind}:" in errors[0], proc.stderr
    return errors[0]


@pytest.fixture
def server(moto_server: LocalDynamoDB) -> LocalDynamoDB:
    return moto_server


@pytest.fixture
def table(server: LocalDynamoDB) -> str:
    name = unique_table("cli")
    XorAckDynamoDB(name, client=server.client()).create_table()
    return name


@pytest.fixture
def ack(server: LocalDynamoDB, table: str) -> XorAckDynamoDB:
    return XorAckDynamoDB(table, client=server.client())


def conn(server: LocalDynamoDB, table: str) -> list[str]:
    assert server.endpoint_url is not None
    return ["--endpoint-url", server.endpoint_url, "--table", table]


def test_help_lists_commands_and_exit_codes() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    for word in ("table", "status", "list", "fail", "touch", "delete", "wordcount", "exit codes:"):
        assert word in proc.stdout
    assert "3  the table does not exist" in proc.stdout
    listing = run("list", "--help")
    assert "WHOLE table" in listing.stdout and "exit codes:" in listing.stdout


def test_the_console_script_exits_with_the_status_and_freezes_what_the_run_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``xor-ack`` is :func:`~xor_ack_dynamodb.cli.run`: the status of ``main`` is the
    exit status (the subprocess tests here check each code through it), and the objects
    left are frozen first, so the interpreter's exit does not collect them again."""
    import gc
    from importlib.metadata import entry_points

    from xor_ack_dynamodb import cli

    (script,) = entry_points(group="console_scripts", name="xor-ack")
    assert script.value == "xor_ack_dynamodb.cli:run"
    monkeypatch.setattr(cli, "main", lambda: 3)
    gc.unfreeze()
    try:
        with pytest.raises(SystemExit) as exited:
            cli.run()
        assert exited.value.code == 3
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_table_create_then_describe(server: LocalDynamoDB) -> None:
    name = unique_table("cli-create")
    # Options after the subcommand...
    created = run("table", "create", *conn(server, name), "--partition-key", "id")
    assert created.returncode == 0, created.stderr
    assert f"table {name} created (key id)" in created.stdout
    # ...and before it, in JSON.
    again = run(*conn(server, name), "--partition-key", "id", "--json", "table", "create")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"table": name, "partition_key": "id", "created": False}

    described = run("table", "describe", *conn(server, name), "--partition-key", "id", "--json")
    assert described.returncode == 0, described.stderr
    info = json.loads(described.stdout)
    assert info["table"] == name
    assert (info["partition_key"], info["partition_key_type"]) == ("id", "S")
    assert info["billing_mode"] == "PAY_PER_REQUEST"
    assert (info["ttl_status"], info["ttl_attribute"]) == ("ENABLED", "expires_at")

    human = run("table", "describe", *conn(server, name), "--partition-key", "id")
    assert human.returncode == 0 and "expires_at" in human.stdout and "PAY_PER_REQUEST" in human.stdout

    # The table's key is 'id'; describing it as keyed by tagID is a problem, said so.
    wrong = run("table", "describe", *conn(server, name))
    assert wrong.returncode == 1 and "warning" in wrong.stderr


def test_table_commands_on_a_missing_table_exit_3(server: LocalDynamoDB) -> None:
    proc = run("table", "describe", *conn(server, "no-such-table"))
    assert proc.returncode == 3
    assert "TableNotFound" in one_error_line(proc, "TableNotFound")
    assert proc.stdout == ""


def test_status_human_json_and_missing(server: LocalDynamoDB, table: str, ack: XorAckDynamoDB) -> None:
    edge = new_stamp()
    ack.create("file-1", edge)
    ack.create("file-2", new_stamp())
    ack.stamp("file-2", ack.status("file-2").stamp)  # acked

    human = run("status", "file-1", "file-2", *conn(server, table))
    assert human.returncode == 0, human.stderr
    assert "file-1" in human.stdout and "pending" in human.stdout and "acked" in human.stdout

    machine = run("--json", "status", "file-2", "file-1", *conn(server, table))
    records = json.loads(machine.stdout)
    assert [r["tag"] for r in records] == ["file-2", "file-1"]
    assert [r["state"] for r in records] == ["acked", "pending"]
    assert records[1]["stamp"] == edge.hex() and records[1]["acked"] is False
    assert records[0]["acked"] is True and records[0]["version"] == 2
    datetime.fromisoformat(records[1]["expires_at"])

    missing = run("status", "file-1", "nope", "--json", *conn(server, table))
    assert missing.returncode == 1
    one_error_line(missing, "TagNotFound")
    assert json.loads(missing.stdout)[1] == {"tag": "nope", "state": None, "error": "TagNotFound"}

    no_table = run("status", "file-1", *conn(server, "missing-table"))
    assert no_table.returncode == 3
    one_error_line(no_table, "TableNotFound")

    wrong_key = run("status", "file-1", "--partition-key", "id", *conn(server, table))
    assert wrong_key.returncode == 3
    one_error_line(wrong_key, "TableSchemaMismatch")


def test_list_by_state_and_prefix(server: LocalDynamoDB, table: str, ack: XorAckDynamoDB) -> None:
    ack.create("a/pending", new_stamp())
    ack.create("a/acked", e := new_stamp())
    ack.stamp("a/acked", e)
    ack.create("b/failed", new_stamp())
    ack.fail("b/failed", "bad input")
    past = XorAckDynamoDB(table, client=server.client(), clock=lambda: time.time() - 7200, ttl=60)
    past.create("b/expired", new_stamp())

    everything = run("list", "--json", "--page-size", "2", *conn(server, table))
    assert everything.returncode == 0, everything.stderr
    states = {r["tag"]: r["state"] for r in json.loads(everything.stdout)}
    assert states == {
        "a/pending": "pending",
        "a/acked": "acked",
        "b/failed": "failed",
        "b/expired": "expired",
    }
    summary = re.search(r"scanned (\d+) items in (\d+) pages; (\d+) matched", everything.stderr)
    assert summary is not None and summary.group(1) == "4" and summary.group(3) == "4"
    assert int(summary.group(2)) >= 2  # two items a page: the Scan was paginated

    for state in ("pending", "acked", "failed", "expired"):
        proc = run("list", "--state", state, "--json", *conn(server, table))
        assert [r["tag"] for r in json.loads(proc.stdout)] == [t for t, s in states.items() if s == state]
    failed = json.loads(run("list", "--state", "failed", "--json", *conn(server, table)).stdout)
    assert failed[0]["reason"] == "bad input"

    prefixed = run("list", "--prefix", "b/", "--json", *conn(server, table))
    assert sorted(r["tag"] for r in json.loads(prefixed.stdout)) == ["b/expired", "b/failed"]

    human = run("list", "--state", "expired", *conn(server, table))
    assert human.returncode == 0 and "b/expired" in human.stdout and "a/pending" not in human.stdout

    limited = run("list", "--limit", "1", "--json", *conn(server, table))
    assert len(json.loads(limited.stdout)) == 1

    assert run("list", *conn(server, "missing-table")).returncode == 3
    bad = run("list", "--state", "done", *conn(server, table))
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_list_reports_an_unreadable_item(server: LocalDynamoDB, table: str, ack: XorAckDynamoDB) -> None:
    ack.create("good", new_stamp())
    server.client().put_item(TableName=table, Item={"tagID": {"S": "bad"}, "stamp": {"S": "not binary"}})
    proc = run("list", "--json", *conn(server, table))
    assert proc.returncode == 1
    assert [r["tag"] for r in json.loads(proc.stdout)] == ["good"]
    assert "CorruptItem" in proc.stderr and "1 unreadable" in proc.stderr


def test_fail(server: LocalDynamoDB, table: str, ack: XorAckDynamoDB) -> None:
    ack.create("job", new_stamp())
    proc = run("fail", "job", "--reason", "operator gave up", "--json", *conn(server, table))
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert (record["state"], record["reason"]) == ("failed", "operator gave up")
    assert ack.status("job").state == "failed"

    human = run("fail", "job", *conn(server, table))  # failing a failed chain changes nothing
    assert human.returncode == 0 and "operator gave up" in human.stdout

    ack.create("done", e := new_stamp())
    ack.stamp("done", e)
    acked = run("fail", "done", *conn(server, table))
    assert acked.returncode == 1
    one_error_line(acked, "TagAcked")

    missing = run("fail", "ghost", *conn(server, table))
    assert missing.returncode == 1
    one_error_line(missing, "TagNotFound")


def test_touch(server: LocalDynamoDB, table: str, ack: XorAckDynamoDB) -> None:
    ack.create("slow", new_stamp())
    before = ack.status("slow").expires_at
    proc = run("touch", "slow", "--ttl", "86400", "--json", *conn(server, table))
    assert proc.returncode == 0, proc.stderr
    after = datetime.fromisoformat(json.loads(proc.stdout)["expires_at"])
    assert before is not None and (after - before).total_seconds() > 80000
    assert ack.status("slow").expires_at == after

    assert "slow" in run("touch", "slow", *conn(server, table)).stdout

    ack.fail("slow", "no")
    failed = run("touch", "slow", *conn(server, table))
    assert failed.returncode == 1
    one_error_line(failed, "TagFailed")

    bad = run("touch", "slow", "--ttl", "-5", *conn(server, table))
    assert bad.returncode == 2
    one_error_line(bad, "usage")


def test_delete(server: LocalDynamoDB, table: str, ack: XorAckDynamoDB) -> None:
    ack.create("gone", new_stamp())
    proc = run("delete", "gone", *conn(server, table))
    assert proc.returncode == 0 and "deleted gone" in proc.stdout
    assert run("status", "gone", *conn(server, table)).returncode == 1

    again = run("delete", "gone", "--json", *conn(server, table))
    assert again.returncode == 1
    one_error_line(again, "TagNotFound")

    ack.create("json", new_stamp())
    assert json.loads(run("delete", "json", "--json", *conn(server, table)).stdout) == {
        "tag": "json",
        "deleted": True,
    }


def test_environment_variables_stand_for_the_options(
    server: LocalDynamoDB, table: str, ack: XorAckDynamoDB
) -> None:
    ack.create("env", x := new_stamp())
    assert server.endpoint_url is not None
    env = _env(
        XOR_ACK_TABLE=table, AWS_ENDPOINT_URL_DYNAMODB=server.endpoint_url, XOR_ACK_PARTITION_KEY="tagID"
    )
    proc = run("--json", "status", "env", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["stamp"] == x.hex()
    # A flag wins over its variable.
    assert run("status", "env", "--table", "other-table", env=env).returncode == 3
    assert xor(x, x).acked


def test_usage_errors_exit_2(server: LocalDynamoDB, table: str) -> None:
    assert server.endpoint_url is not None
    no_table = run("status", "x", "--endpoint-url", server.endpoint_url)
    assert no_table.returncode == 2
    assert "--table is required" in one_error_line(no_table, "usage")

    bad_tag = run("status", "", *conn(server, table))
    assert bad_tag.returncode == 2
    one_error_line(bad_tag, "InvalidTag")

    bad_table_name = run("status", "x", *conn(server, "a"))
    assert bad_table_name.returncode == 2
    one_error_line(bad_table_name, "InvalidConfig")

    assert run("frobnicate").returncode == 2


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_aws_errors_exit_4_without_secrets(server: LocalDynamoDB, table: str) -> None:
    unreachable = run("status", "x", "--table", table, "--endpoint-url", f"http://127.0.0.1:{_closed_port()}")
    assert unreachable.returncode == 4
    one_error_line(unreachable, "EndpointConnectionError")

    env: dict[str, Any] = _env()
    del env["AWS_REGION"]
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    no_region = run("status", "x", "--table", table, env=env)
    assert no_region.returncode == 4
    one_error_line(no_region, "NoRegionError")

    no_credentials: dict[str, Any] = _env(AWS_EC2_METADATA_DISABLED="true")
    del no_credentials["AWS_ACCESS_KEY_ID"], no_credentials["AWS_SECRET_ACCESS_KEY"]
    no_credentials["AWS_CONFIG_FILE"] = no_credentials["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    proc = run("status", "x", *conn(server, table), env=no_credentials)
    assert proc.returncode == 4
    one_error_line(proc, "NoCredentialsError")

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
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import no_aws_files
from conftest import unique_table

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB, new_stamp, xor

pytestmark = pytest.mark.server

SECRET = "s3cr3t-VALUE-that-must-never-print"
REPO = Path(__file__).resolve().parent.parent


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


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``xor-ack ARGS`` in a fresh interpreter, as a user would run it."""
    proc = subprocess.run(
        [sys.executable, "-m", "xor_ack_dynamodb", *args],
        capture_output=True,
        text=True,
        env=env or _env(),
        timeout=timeout,
        input=stdin,
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
    starts: list[float] = []

    def main(started_at: float) -> int:
        starts.append(started_at)
        return 3

    monkeypatch.setattr(cli, "main", main)
    gc.unfreeze()
    try:
        with pytest.raises(SystemExit) as exited:
            cli.run()
        assert exited.value.code == 3
        assert gc.get_freeze_count() > 0
        # Timed from the process's start, which was before this test began.
        assert starts and starts[0] <= time.time() - 0.5
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

    # The table's key is 'id'; describing it as keyed by tagID is a problem, said so:
    # the description, then the error in the one form, exit 3.
    wrong = run("table", "describe", *conn(server, name))
    assert wrong.returncode == 3 and "PAY_PER_REQUEST" in wrong.stdout
    one_error_line(wrong, "TableSchemaMismatch")


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
    one_error_line(proc, "CorruptItem")
    status = run("status", "good", "bad", "--json", *conn(server, table))
    assert status.returncode == 1
    assert [r["state"] for r in json.loads(status.stdout)] == ["pending", "corrupt"]
    assert "'bad' cannot be read" in one_error_line(status, "CorruptItem")


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
    one_error_line(bad, "UsageError")


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
    assert "--table is required" in one_error_line(no_table, "UsageError")

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
    one_error_line(unreachable, "EndpointUnreachable")
    # The same for a command that calls DynamoDB itself (a Scan, a DescribeTable).
    for command in (["list"], ["table", "describe"]):
        proc = run(*command, "--table", table, "--endpoint-url", f"http://127.0.0.1:{_closed_port()}")
        assert proc.returncode == 4, proc.stderr
        one_error_line(proc, "EndpointUnreachable")


def test_no_region_an_unknown_region_or_no_credentials_exit_2(
    server: LocalDynamoDB, table: str, tmp_path: Path
) -> None:
    """Configuration, said before any request reaches DynamoDB: no region anywhere, a
    region that does not exist, no credentials (the library's typed errors)."""
    no_credentials: dict[str, Any] = no_aws_files(_env(AWS_EC2_METADATA_DISABLED="true"), tmp_path)
    del no_credentials["AWS_ACCESS_KEY_ID"], no_credentials["AWS_SECRET_ACCESS_KEY"]
    proc = run("status", "x", *conn(server, table), env=no_credentials)
    assert proc.returncode == 2
    assert "Unable to locate credentials" in one_error_line(proc, "InvalidConfig")

    env: dict[str, Any] = no_aws_files(_env(), tmp_path)
    del env["AWS_REGION"]
    no_region = run("status", "x", "--table", table, env=env)
    assert no_region.returncode == 2
    assert "pass --region" in one_error_line(no_region, "InvalidConfig")

    typo = run("table", "describe", "--table", table, "--region", "eu-wst-1")
    assert typo.returncode == 2
    assert "eu-west-1" in one_error_line(typo, "UnknownRegion")  # did you mean


# -- pipes, terminals, the one error form -----------------------------------------------


def _drain(fd: int) -> bytes:
    """Everything written to a pseudo-terminal until its other end is closed."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def on_terminal(*args: str, stream: str = "stdout", stdin: str = "") -> tuple[int, str, str]:
    """``xor-ack ARGS`` with ``stream`` (stdout or stderr) a terminal, a pseudo-terminal
    read as it is written, the other a pipe: its status, what it printed on the terminal
    and what on the pipe."""
    import pty
    import threading

    leader, follower = pty.openpty()
    shown: list[bytes] = []
    reader = threading.Thread(target=lambda: shown.append(_drain(leader)))
    reader.start()
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "xor_ack_dynamodb", *args],
            stdin=subprocess.PIPE,
            stdout=follower if stream == "stdout" else subprocess.PIPE,
            stderr=follower if stream == "stderr" else subprocess.PIPE,
            env=_env(),
        ) as proc:
            os.close(follower)
            piped = proc.communicate(stdin.encode(), timeout=120)[0 if stream == "stderr" else 1]
    finally:
        reader.join(timeout=30)
        os.close(leader)
    return proc.returncode, shown[0].decode(), piped.decode()


def test_piped_output_is_one_record_a_line(server: LocalDynamoDB, table: str, ack: XorAckDynamoDB) -> None:
    """Piped, ``list`` and ``status`` print one chain a line, tab-separated, no title nor
    header, so ``grep -c`` counts chains and ``cut`` picks columns; a tab, a newline or a
    backslash in a field is escaped (41ecf98 printed an 80-column box table that wrapped
    tags over several lines: ``xor-ack list | grep -c day1`` gave 0)."""
    for tag in ("ingest/day1/part-0001.jsonl", "ingest/day1/part-0002.jsonl", "ingest/day2/part-0001.jsonl"):
        ack.create(tag, new_stamp())
    odd = "odd\ttag"
    ack.create(odd, new_stamp())
    ack.fail(odd, "line one\nline two \\ end")

    assert server.endpoint_url is not None
    command = " ".join(
        [sys.executable, "-m", "xor_ack_dynamodb", "list", "--endpoint-url", server.endpoint_url]
        + ["--table", table, "|", "grep", "-c", "day1"]
    )
    grep = subprocess.run(command, shell=True, capture_output=True, text=True, env=_env(), timeout=120)
    assert grep.stdout.strip() == "2", grep.stdout + grep.stderr

    listing = run("list", *conn(server, table))
    assert listing.returncode == 0, listing.stderr
    rows = [line.split("\t") for line in listing.stdout.splitlines()]
    assert [len(row) for row in rows] == [6] * 4  # tag, state, version, expires_at, stamp, reason
    assert [row[0] for row in rows] == [
        "ingest/day1/part-0001.jsonl",
        "ingest/day1/part-0002.jsonl",
        "ingest/day2/part-0001.jsonl",
        "odd\\ttag",
    ]
    assert rows[3][1] == "failed" and rows[3][5] == "line one\\nline two \\\\ end"
    assert {row[1] for row in rows[:3]} == {"pending"}

    status = run("status", "ingest/day2/part-0001.jsonl", odd, *conn(server, table))
    assert [line.split("\t")[:2] for line in status.stdout.splitlines()] == [
        ["ingest/day2/part-0001.jsonl", "pending"],
        ["odd\\ttag", "failed"],
    ]
    # What list prints piped is what status - reads: the tags round-trip, escapes and all.
    statuses = subprocess.run(
        command.replace("| grep -c day1", "| cut -f1 | ")
        + " ".join([sys.executable, "-m", "xor_ack_dynamodb", "status", "-"] + conn(server, table)),
        shell=True,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert statuses.returncode == 0, statuses.stderr
    assert statuses.stdout == listing.stdout

    described = run("table", "describe", *conn(server, table))
    pairs = dict(line.split("\t") for line in described.stdout.splitlines())
    assert pairs["table"] == table and pairs["ttl_attribute"] == "expires_at"


def test_a_terminal_gets_tables(server: LocalDynamoDB, table: str, ack: XorAckDynamoDB) -> None:
    ack.create("ingest/day1/part-0001.jsonl", new_stamp())
    status, text, _ = on_terminal("list", *conn(server, table))
    assert status == 0
    assert f"chains in {table}" in text  # the title
    assert "┃ tag" in text.replace("\x1b[1m", "").replace("\x1b[0m", "")  # the header row
    assert "ingest/day1/part-0001.jsonl" in text and "pending" in text


def test_status_of_many_tags_shows_a_progress_bar_on_a_terminal(
    server: LocalDynamoDB, table: str, ack: XorAckDynamoDB
) -> None:
    """``status`` reads many tags as BatchGetItems of 100 (``status_many``); a bar on
    stderr counts the chains read when stderr is a terminal, and nothing is printed
    there when it is not."""

    tags = [f"bulk/{n:04d}" for n in range(250)]
    ack.create_many({tag: new_stamp() for tag in tags})
    status, bar, out = on_terminal(
        "status", "-", *conn(server, table), stream="stderr", stdin="\n".join(tags)
    )
    assert status == 0
    assert len(out.splitlines()) == 250
    assert "250/250" in bar and "chains" in bar
    piped = run("status", *tags[:150], *conn(server, table))
    assert piped.returncode == 0 and piped.stderr == ""


def test_rich_is_a_requirement_of_what_installs_the_command() -> None:
    """The console script comes with the base package, and so must rich, which prints
    its tables and progress: nothing in the command branches on whether rich happens to
    be installed (41ecf98 printed tab-separated text or tables depending on it)."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["xor-ack"] == "xor_ack_dynamodb.cli:run"
    assert any(re.match(r"rich\s*(>=|$)", r) for r in project["dependencies"]), project["dependencies"]
    for path in (REPO / "xor_ack_dynamodb" / "cli").glob("*.py"):
        assert "except ImportError" not in path.read_text(), path


@pytest.mark.parametrize(
    ("args", "kind", "words"),
    [
        (["status"], "UsageError", "the following arguments are required: TAG"),
        (["list", "--state", "done"], "UsageError", "invalid choice: 'done'"),
        (["frobnicate"], "UsageError", "invalid choice: 'frobnicate'"),
        (["list", "--tabel", "x"], "UsageError", "unrecognized arguments: --tabel x"),
        (["wordcount", "--fail-rate", "1.5"], "UsageError", "must be at least 0 and below 1"),
        (["wordcount", "/no/such/file"], "FileNotFoundError", "no such file or directory: /no/such/file"),
        (["wordcount", "--api", "rdd", "--remote", "sc://127.0.0.1:1"], "UsageError", "has no RDDs"),
        (["wordcount", "--table", "a"], "InvalidConfig", "table name 'a' is not valid"),
    ],
)
def test_every_error_takes_the_one_form(args: list[str], kind: str, words: str, tmp_path: Path) -> None:
    """``xor-ack: error: <Kind>: <message>``, one line, exit 2, before Spark or DynamoDB
    is reached: argparse's errors and the word count's too (41ecf98 printed
    ``xor-ack status: error: ...`` and the word count's ``error: ...``)."""
    proc = run(*args, "--output", str(tmp_path)) if args[0] == "wordcount" else run(*args)
    assert proc.returncode == 2, proc.stderr
    assert words in one_error_line(proc, kind)
    assert proc.stdout == ""


def test_the_bundled_corpus_is_package_data() -> None:
    """``xor-ack wordcount`` with no INPUT counts a corpus installed with the package
    (importlib.resources), not one of the source checkout (41ecf98:
    ``.../site-packages/examples/data is missing`` from a wheel); the examples' copy
    is the same files."""
    from importlib import resources

    import xor_ack_dynamodb
    from xor_ack_dynamodb.jobs.wordcount.words import default_corpus

    corpus = default_corpus()
    assert corpus == resources.files("xor_ack_dynamodb.jobs.wordcount") / "corpus"
    assert corpus.is_relative_to(Path(xor_ack_dynamodb.__file__).parent)
    files = {p.name: p.read_bytes() for p in corpus.iterdir()}
    assert len(files) == 24 and sum(map(len, files.values())) < 150_000
    assert files == {p.name: p.read_bytes() for p in (REPO / "examples" / "data").iterdir()}


def test_the_process_start_is_the_interpreter_s() -> None:
    """What ``wall seconds`` counts from: the process's start, before the interpreter
    ran a line (a second slept before the import is counted)."""
    script = (
        "import time; time.sleep(1.0); before = time.time(); "
        "from xor_ack_dynamodb.cli.clock import process_start; print(before - process_start())"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert 1.0 <= float(proc.stdout) < 30, proc.stdout + proc.stderr


def _subparser(name: str) -> Any:
    import argparse

    from xor_ack_dynamodb.cli import build_parser

    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return commands.choices[name]


def _doc_table(path: Path, heading: str) -> dict[str, list[str]]:
    """The rows of the first table under ``heading``, by their first cell."""
    text = path.read_text()
    section = text[text.index(heading) :]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("| option"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
        elif rows:
            break
    return rows


def test_the_word_count_docs_state_every_option_and_default_the_command_has() -> None:
    """docs/wordcount.md's table lists every option of ``xor-ack wordcount`` with the
    default its parser applies, and the help says the same (41ecf98: the docs said two
    requests per file, the command sent transactions by default)."""
    import argparse

    parser = _subparser("wordcount")
    rows = _doc_table(REPO / "docs" / "wordcount.md", "## Options and their defaults")
    seen = set()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = action.option_strings[0] if action.option_strings else "INPUT..."
        (key,) = [k for k in rows if k.strip("`").split(" ")[0] == name.split(" ")[0]]
        seen.add(key)
        default, help_text = rows[key][0], " ".join((action.help or "").split())
        if isinstance(action, argparse._StoreTrueAction):
            assert default.startswith("off"), (name, default)
        elif action.default not in (None, [], argparse.SUPPRESS):
            value = format(action.default, "g") if isinstance(action.default, float) else str(action.default)
            assert default == f"`{value}`", (name, default, value)
            said = f"default {value}" in help_text or f"({value}, default)" in help_text
            assert said or name == "--table", (name, help_text)
    assert seen == set(rows), set(rows) - seen
    assert "`xor-ack-wordcount`" == rows["`--table TABLE`"][0]
    assert "default xor-ack-wordcount" in (parser._option_string_actions["--table"].help or "")
    # Transactions by default, said by the help, this page and spark.md.
    assert parser._option_string_actions["--single-writes"].default is False
    assert "default: transactions" in (parser._option_string_actions["--single-writes"].help or "")
    spark = " ".join((REPO / "docs" / "spark.md").read_text().split())
    assert "`xor-ack wordcount` sends them by default" in spark


def test_the_cli_docs_state_the_operator_commands_defaults() -> None:
    """Every non-empty default of an operator command's option is on the line of
    docs/cli.md that names the option."""
    import argparse

    doc = (REPO / "docs" / "cli.md").read_text().splitlines()
    checked = 0
    for name in ("table", "status", "list", "stamp", "fail", "touch", "delete"):
        for action in _subparser(name)._actions:
            if action.default in (None, False, [], argparse.SUPPRESS) or not action.option_strings:
                continue
            option = action.option_strings[0]
            lines = [line for line in doc if f"`{option}" in line or f"[{option}" in line]
            assert any(str(action.default) in line for line in lines), (name, option, action.default)
            checked += 1
    assert checked >= 2  # --page-size 1000, --mode xor
    # touch --ttl: the tracker's TTL, which the help and the page give as 3600.
    touch = _subparser("touch")._option_string_actions["--ttl"]
    assert "default 3600" in (touch.help or "")
    assert any("`touch" in line and "(default 3600)" in line for line in doc)
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9")
    assert XorAckDynamoDB("t-default", client=client).rules.ttl == 3600

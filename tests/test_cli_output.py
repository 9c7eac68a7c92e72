"""What the command prints in a pipe, as a user's pipes meet it (issue 40): every field
whole, and a reader that leaves early (``| head -1``) ends the command quietly, exit 0,
with no traceback; and what ``print(ack.stats)`` shows."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from cli_helpers import run_reader_gone
from conftest import unique_table
from test_cli import _env, conn, on_terminal, run

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB, new_stamp

pytestmark = pytest.mark.server

#: Rows enough that a reader gone shows in the middle of the output, not only at the
#: last flush: more than Python's 8 KiB stdout buffer, as lines and as JSON.
MANY = 150


@pytest.fixture
def table(moto_server: LocalDynamoDB) -> str:
    name = unique_table("cli-out")
    XorAckDynamoDB(name, client=moto_server.client()).create_table()
    return name


def test_a_reader_that_leaves_early_ends_the_command_quietly(moto_server: LocalDynamoDB, table: str) -> None:
    """stdout a pipe whose reader has gone: ``list``, ``list --json``, ``status -`` and
    ``--help`` stop, print nothing on stderr and exit 0 (the reader has what it asked for), as
    docs/cli.md says (before: a ``BrokenPipeError`` traceback and exit 1; ``--help``:
    Python's "Exception ignored" and exit 120)."""
    ack = XorAckDynamoDB(table, client=moto_server.client())
    tags = [f"ingest/day1/part-{n:04d}.jsonl" for n in range(MANY)]
    assert not ack.create_many({tag: new_stamp() for tag in tags}).failed
    buffered = {k: v for k, v in _env().items() if k != "PYTHONUNBUFFERED"}
    unbuffered = {**buffered, "PYTHONUNBUFFERED": "1"}  # every write fails at once, not at a flush
    for env, args, stdin in (
        (buffered, ["list"], ""),
        (buffered, ["list", "--json"], ""),
        (buffered, ["status", "-"], "\n".join(tags)),
        (buffered, ["--help"], ""),
        (unbuffered, ["list"], ""),
        (unbuffered, ["--help"], ""),
    ):
        command = args if args == ["--help"] else [*args, *conn(moto_server, table)]
        status, stderr = run_reader_gone(*command, env=env, stdin=stdin)
        assert (status, stderr) == (0, ""), (args, env.get("PYTHONUNBUFFERED"), status, stderr)

    # The same in a real shell pipeline: the first chain, whole, and no traceback.
    assert moto_server.endpoint_url is not None
    script = (
        f"{sys.executable} -m xor_ack_dynamodb list --endpoint-url {moto_server.endpoint_url} "
        f"--table {table} | head -1"
    )
    head = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=_env(), timeout=120)
    assert head.returncode == 0 and "Traceback" not in head.stderr, head.stderr
    first = head.stdout.splitlines()
    assert len(first) == 1 and first[0].split("\t")[0] == tags[0]
    assert first[0].split("\t")[4] == ack.status(tags[0]).stamp.hex()


def _by_tag(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["tag"]: r for r in records}


def test_piped_and_terminal_fields_are_whole(moto_server: LocalDynamoDB, table: str) -> None:
    """Piped, ``list`` and ``status`` print each field whole: the stamp is all its hex
    digits (what ``--json`` gives and ``stamp --finish`` takes), in sum mode all its
    decimal digits; a terminal's table shows it whole too (before: ``c306eec6453eed9…``,
    cut to 15 digits in a pipe, where no terminal width applies)."""
    xor = XorAckDynamoDB(table, client=moto_server.client())
    xor.create("x/wide", new_stamp())
    summed = XorAckDynamoDB(table, client=moto_server.client(), mode="sum")
    summed.create("x/sum", 2**62 + 12345)
    expected = _by_tag(json.loads(run("list", "--json", *conn(moto_server, table)).stdout))
    assert len(expected["x/wide"]["stamp"]) == 32

    listing = run("list", *conn(moto_server, table))
    status = run("status", "x/wide", "x/sum", *conn(moto_server, table))
    for proc in (listing, status):
        assert proc.returncode == 0, proc.stderr
        rows = [line.split("\t") for line in proc.stdout.splitlines()]
        assert {row[0]: row[4] for row in rows} == {t: r["stamp"] for t, r in expected.items()}
        assert "…" not in proc.stdout

    code, shown, _ = on_terminal("list", *conn(moto_server, table))
    assert code == 0
    assert expected["x/wide"]["stamp"] in shown and str(2**62 + 12345) in shown


def test_request_stats_print_their_counts(inproc_client: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``print(ack.stats)`` shows every count (requests by operation, events, capacity),
    not ``<RequestStats object at 0x...>``."""
    ack = XorAckDynamoDB("stats-repr", client=inproc_client)
    ack.create_table()
    root = new_stamp()
    ack.create("t", root)
    ack.stamp("t", finished=[root], op_id="op-1")
    ack.stamp("t", finished=[root], op_id="op-1")  # a duplicate: counted as such
    print(ack.stats)
    shown = capsys.readouterr().out.strip()
    assert shown == repr(ack.stats)
    assert shown.startswith(f"RequestStats(requests={ack.stats.total_requests} {{")
    for operation, count in ack.stats.requests.items():
        assert f"{operation}: {count}" in shown, shown
    assert ack.stats.events.get("duplicates") == 1
    for event, count in ack.stats.events.items():
        assert f"{event}={count}" in shown, shown
    assert f"capacity_units={ack.stats.capacity_units:g}" in shown

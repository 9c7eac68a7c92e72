"""The command's errors as a new user meets them (issue 40): one line each, every
documented exit status, hints that name the flag to pass, a missing extra named in one
line, a mistyped region refused before any request.

Each runs ``xor-ack`` in a subprocess, against the session's moto server or a real
socket on 127.0.0.1."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import SilentEndpoint, no_aws_files
from conftest import unique_table
from test_cli import _env, conn, one_error_line, run

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB, new_stamp
from xor_ack_dynamodb.cli.common import EXIT_CODES, EXTRAS

pytestmark = pytest.mark.server

REPO = Path(__file__).resolve().parent.parent


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def chains(moto_server: LocalDynamoDB) -> dict[str, Any]:
    """A table with a pending xor chain, an acked one, a sum chain and a chain that
    applied op ``op-a``; its name and the xor chain's edges."""
    table = unique_table("cli-errors")
    ack = XorAckDynamoDB(table, client=moto_server.client())
    ack.create_table()
    root, child = new_stamp(), new_stamp()
    ack.create("xor/1", root)
    ack.create("xor/acked", done := new_stamp())
    ack.stamp("xor/acked", finished=[done])
    ack.create("xor/op", root)
    ack.stamp("xor/op", finished=[root], started=[child], op_id="op-a")
    XorAckDynamoDB(table, client=moto_server.client(), mode="sum").create("sum/1", 12345678901)
    return {"table": table, "ack": ack, "root": root}


#: A command meeting each documented exit status (a closed stdout's 0 is in tests/test_cli_output.py):
#: (id, status, kind, arguments given the connection options and the xor chain's root).
SCENARIOS: list[tuple[str, int, str | None, Callable[[list[str], bytes], list[str]]]] = [
    ("success", 0, None, lambda c, r: ["status", "xor/1", *c]),
    ("tag-not-found", 1, "TagNotFound", lambda c, r: ["status", "xor/none", *c]),
    ("acked", 1, "TagAcked", lambda c, r: ["fail", "xor/acked", *c]),
    ("other-mode", 1, "ChainModeMismatch", lambda c, r: ["stamp", "sum/1", "--finish", "abcd", *c]),
    ("bad-option", 2, "UsageError", lambda c, r: ["stamp", "xor/1", *c]),
    ("invalid-tag", 2, "InvalidTag", lambda c, r: ["status", "", *c]),
    ("zero-edge", 2, "ZeroBufferNoOp", lambda c, r: ["stamp", "xor/1", "--finish", "00", *c]),
    ("edge-length", 2, "BufferLengthsUnequal", lambda c, r: ["stamp", "xor/1", "--finish", "aabb", *c]),
    (
        "op-id-reused",
        2,
        "OpIdReused",
        lambda c, r: ["stamp", "xor/op", "--finish", new_stamp().hex(), "--op-id", "op-a", *c],
    ),
    ("no-table", 3, "TableNotFound", lambda c, r: ["status", "xor/1", *c, "--table", "no-such-table"]),
    ("migrate-no-table", 3, "TableNotFound", lambda c, r: ["migrate", *c, "--table", "no-such-table"]),
    (
        "unreachable",
        4,
        "EndpointUnreachable",
        lambda c, r: ["status", "xor/1", *c, "--endpoint-url", f"http://127.0.0.1:{_closed_port()}"],
    ),
]


def _doc_codes() -> dict[int, str]:
    text = (REPO / "docs" / "cli.md").read_text()
    section = text[text.index("## Exit codes") :].split("\n## ")[0]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \| (.+) \|$", section, re.M)}


def _help_codes(*args: str) -> set[int]:
    text = run(*args, "--help").stdout
    section = text[text.index("exit codes:") :].split("\n\n")[0]
    return {int(m.group(1)) for m in re.finditer(r"^  (\d+) ", section, re.M)}


def test_the_exit_codes_are_the_same_in_the_docs_the_help_and_the_code() -> None:
    """docs/cli.md's table, ``--help``'s epilog (top level, an operator command, the word
    count) and the command's own table list the same statuses, and a test below (or
    tests/test_cli_output.py for a closed stdout) meets each."""
    documented = set(_doc_codes())
    assert documented == set(EXIT_CODES) == {0, 1, 2, 3, 4, 130}
    assert _help_codes() == _help_codes("status") == _help_codes("wordcount") == documented
    met = {status for _, status, _, _ in SCENARIOS} | {130}
    assert met == documented


@pytest.mark.parametrize(
    ("status", "kind", "args"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS]
)
def test_each_exit_status(
    moto_server: LocalDynamoDB,
    chains: dict[str, Any],
    status: int,
    kind: str | None,
    args: Callable[[list[str], bytes], list[str]],
) -> None:
    """The status docs/cli.md gives, and the error in its one form (one line, no
    traceback: ``run`` checks that); a usage error (2) writes nothing."""
    ack: XorAckDynamoDB = chains["ack"]
    before = {tag: ack.status(tag).version for tag in ("xor/1", "xor/op")}
    proc = run(*args(conn(moto_server, chains["table"]), chains["root"]))
    assert proc.returncode == status, proc.stderr
    if kind is None:
        assert "xor-ack: error:" not in proc.stderr
    else:
        one_error_line(proc, kind)
        assert proc.stdout == ""
    assert {tag: ack.status(tag).version for tag in before} == before


def _as_from_a_terminal() -> None:
    """In the child before it runs: SIGINT as a shell leaves it for a command it starts
    (default action, not blocked), whatever an earlier test left in this worker."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_exits_130() -> None:
    """Ctrl-C while a request waits: ``KeyboardInterrupt`` in the one form, 130."""
    with SilentEndpoint() as endpoint:
        with subprocess.Popen(
            [sys.executable, "-m", "xor_ack_dynamodb", "list", "--table", "chains"]
            + ["--endpoint-url", endpoint.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            preexec_fn=_as_from_a_terminal,
        ) as proc:
            endpoint.wait_for_request(timeout=60)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err == "xor-ack: error: KeyboardInterrupt: interrupted\n" and out == ""


# -- hints that name the flag ------------------------------------------------------------


def _no_region_env(folder: Path) -> dict[str, str]:
    env = no_aws_files(_env(), folder)
    del env["AWS_REGION"]
    return env


def test_configuration_hints_name_the_flags(moto_server: LocalDynamoDB, tmp_path: Path) -> None:
    """No region, with an endpoint, on an operator command and on the word count; an
    endpoint that is not a URL; a mistyped region; no credentials; no table: each line
    names the flag (``--region``, ``--endpoint-url``) or the command to run, never a
    keyword of the library (before, the word count said ``AckConfig(region=...)``)."""
    assert moto_server.endpoint_url is not None
    endpoint = ["--endpoint-url", moto_server.endpoint_url]
    for args in (
        ["status", "x", "--table", "chains", *endpoint],
        ["wordcount", "--output", str(tmp_path), *endpoint],
    ):
        proc = run(*args, env=_no_region_env(tmp_path))
        assert proc.returncode == 2, proc.stderr
        line = one_error_line(proc, "InvalidConfig")
        assert "pass --region" in line and "AckConfig" not in line and "region=" not in line, line

    not_a_url = run("status", "x", "--table", "chains", "--endpoint-url", "not-a-url")
    assert not_a_url.returncode == 2
    line = one_error_line(not_a_url, "InvalidConfig")
    assert "--endpoint-url" in line and "endpoint_url=" not in line, line

    typo = run("status", "x", "--table", "chains", "--region", "eu-wst-1")
    assert typo.returncode == 2
    line = one_error_line(typo, "UnknownRegion")
    assert "--region" in line and "region=" not in line and "eu-west-1" in line, line

    no_keys = no_aws_files(_env(AWS_EC2_METADATA_DISABLED="true"), tmp_path)
    del no_keys["AWS_ACCESS_KEY_ID"], no_keys["AWS_SECRET_ACCESS_KEY"]
    proc = run("status", "x", "--table", "chains", *endpoint, env=no_keys)
    assert proc.returncode == 2
    line = one_error_line(proc, "InvalidConfig")
    assert "AWS_ACCESS_KEY_ID" in line and "aws_access_key_id=" not in line, line

    missing = run("status", "x", *conn(moto_server, "no-such-table"))
    line = one_error_line(missing, "TableNotFound")
    assert "xor-ack table create --table no-such-table" in line and "XorAckDynamoDB(" not in line, line


def test_stamp_hints_name_the_mode_flag(moto_server: LocalDynamoDB, chains: dict[str, Any]) -> None:
    """An edge that is not of the mode given, or a chain of the other mode: the line
    says which ``--mode`` to pass (before: "not a xor-mode edge", no hint)."""
    c = conn(moto_server, chains["table"])
    odd = run("stamp", "sum/1", "--finish", "12345", *c)  # decimal digits, xor by default
    assert odd.returncode == 2
    assert "pass --mode sum" in one_error_line(odd, "UsageError")
    even = run("stamp", "sum/1", "--finish", "1234", *c)  # also hex: the chain says sum
    assert even.returncode == 1
    assert "pass --mode sum" in one_error_line(even, "ChainModeMismatch")
    other = run("stamp", "xor/1", "--finish", "1234", "--mode", "sum", *c)
    assert other.returncode == 1
    assert "leave out --mode" in one_error_line(other, "ChainModeMismatch")
    hex_in_sum = run("stamp", "xor/1", "--finish", "ab", "--mode", "sum", *c)
    assert hex_in_sum.returncode == 2
    assert "leave out --mode" in one_error_line(hex_in_sum, "UsageError")


# -- a missing extra -----------------------------------------------------------------------

_BLOCKER = """\
import sys

class _NotInstalled:
    '''As if these were not installed: a [local] install has no PySpark.'''
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


def test_a_missing_extra_is_named_in_one_line(tmp_path: Path) -> None:
    """``xor-ack wordcount`` where PySpark cannot be imported (a ``sitecustomize`` on
    ``PYTHONPATH`` blocks it): one line naming the extra and how to install it, exit 2,
    before anything runs (before: a ``ModuleNotFoundError`` traceback)."""
    (tmp_path / "sitecustomize.py").write_text(_BLOCKER.format(blocked={"pyspark"}))
    env = _env(PYTHONPATH=str(tmp_path))
    check = subprocess.run([sys.executable, "-c", "import pyspark"], env=env, capture_output=True, timeout=60)
    assert check.returncode == 1 and b"No module named 'pyspark'" in check.stderr  # the blocker works
    proc = run("wordcount", "--output", str(tmp_path / "out"), env=env)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc, "ModuleNotFoundError")
    assert "No module named 'pyspark'" in line and "pip install '.[spark]'" in line, line
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
    assert not (tmp_path / "out").exists()


def test_the_extras_named_are_those_of_pyproject() -> None:
    """Each module the command names an extra for is a requirement of that extra."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRAS.items():
        names = {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower() for r in extras[extra]}
        assert module in names, (module, extra, names)


# -- a mistyped region with an endpoint ----------------------------------------------------


def test_a_region_typo_with_an_endpoint_is_refused_before_any_request() -> None:
    """``AWS_REGION=eu-wst-1`` with ``--endpoint-url``: ``UnknownRegion`` naming the region
    meant, exit 2, and no connection reached the endpoint."""
    with SilentEndpoint() as endpoint:
        proc = run(
            "status",
            "x",
            "--table",
            "chains",
            "--endpoint-url",
            endpoint.url,
            env=_env(AWS_REGION="eu-wst-1"),
        )
        accepted = list(endpoint.accepted)
    assert proc.returncode == 2, proc.stderr
    assert "eu-west-1" in one_error_line(proc, "UnknownRegion")
    assert accepted == []

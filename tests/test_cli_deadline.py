"""docs/cli.md's bound on a command's time, held against a real socket on 127.0.0.1 that
accepts connections and never answers (issue 40: ``xor-ack status x`` took 92.5 s there,
botocore's 3 attempts of a 30 s read timeout, where the page promised 15 s).

A bound check, not a benchmark: from the first connection to the exit, the documented
bound plus a little slack for the interpreter's exit; from the start, plus the
interpreter's start on a loaded machine."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from cli_helpers import SilentEndpoint
from test_cli import one_error_line, run

from xor_ack_dynamodb.cli.common import OPERATOR_RETRY

REPO = Path(__file__).resolve().parent.parent
#: Past the bound, from the first request: the process's exit.
EXIT_SLACK = 3.0
#: Past the bound, from the start: the interpreter's start and imports on a busy machine.
START_SLACK = 20.0


def documented_bound() -> float:
    """The seconds docs/cli.md says a command takes at most from its first request."""
    text = " ".join((REPO / "docs" / "cli.md").read_text().split())
    found = re.search(r"a command gives up within (\d+) seconds of its first request", text)
    assert found, "docs/cli.md no longer states the bound"
    return float(found.group(1))


def test_the_documented_bound_is_the_commands_budget() -> None:
    """The page's figures are the policy's: 15 s, 3 botocore attempts of a 4 s read."""
    assert documented_bound() == OPERATOR_RETRY.max_seconds
    connect, read = OPERATOR_RETRY.timeouts()
    text = " ".join((REPO / "docs" / "cli.md").read_text().split())
    assert f"({connect:g} s to connect, {read:g} s per read)" in text
    assert f"{OPERATOR_RETRY.http_attempts} botocore attempts a request" in text
    assert f"up to {OPERATOR_RETRY.max_attempts} library attempts" in text
    # One request's attempts fit in the bound, so the first library attempt ends within it.
    assert OPERATOR_RETRY.http_attempts * max(connect, read) < documented_bound()


@pytest.mark.parametrize("command", [["status", "x"], ["list"]], ids=["status", "list"])
def test_a_silent_endpoint_ends_the_command_within_the_documented_bound(command: list[str]) -> None:
    """``status`` (the tracker's BatchGetItem, under the library's retry budget) and
    ``list`` (a Scan the command sends itself): exit 4, ``ReadTimeout`` (for ``list``,
    naming ``--page-size``), within the bound; botocore's attempts were the policy's,
    none more."""
    bound = documented_bound()
    with SilentEndpoint() as endpoint:
        started = time.monotonic()
        proc = run(*command, "--table", "chains", "--endpoint-url", endpoint.url, timeout=bound + 45)
        ended = time.monotonic()
        accepted = list(endpoint.accepted)
    assert proc.returncode == 4, proc.stderr
    line = one_error_line(proc, "ReadTimeout")
    if command == ["list"]:  # the flag that asks less of a slow backend
        assert "a smaller --page-size (now 1000)" in line, line
    assert accepted, "no request reached the endpoint"
    assert ended - accepted[0] <= bound + EXIT_SLACK, (ended - accepted[0], bound)
    assert ended - started <= bound + START_SLACK, (ended - started, bound)
    assert len(accepted) == OPERATOR_RETRY.http_attempts

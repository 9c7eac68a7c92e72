"""A new user's first hour (issue 33, "smaller ones"): the README's serverless setup
runs as written, the stream poller finds its region where the pipeline's client has it,
a sum-mode chain cannot start from a negative value, and the ``xor_ack_config`` fixture
works whatever ``AWS_PROFILE`` the developer's shell holds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import xor_ack_dynamodb
from xor_ack_dynamodb import MemoryAck, XorAckDynamoDB, errors
from xor_ack_dynamodb.serverless import Pipeline

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PACKAGE_ROOT = Path(xor_ack_dynamodb.__file__).resolve().parent.parent


def _bare_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a shell with no AWS configuration at all: no AWS_ variable,
    no config or credentials file, no instance metadata to ask."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTEST_", "XOR_ACK_"))}
    empty = tmp_path / "aws-config-empty"
    empty.write_text("")
    env.update(
        PYTHONPATH=str(PACKAGE_ROOT),  # the package under test, wherever the process runs
        AWS_CONFIG_FILE=str(empty),
        AWS_SHARED_CREDENTIALS_FILE=str(empty),
        AWS_EC2_METADATA_DISABLED="true",
        **extra,
    )
    return env


def _readme_serverless_setup() -> dict[str, str]:
    """The variables the README's serverless setup block exports."""
    text = README.read_text()
    section = text[text.index("**Serverless**") :]
    block = re.search(r"<!-- example: setup -->\s*```sh\n(.*?)```", section, re.S)
    assert block is not None, "the README's serverless section has no shell setup block"
    variables: dict[str, str] = {}
    for line in block.group(1).strip().splitlines():
        words = line.split()
        assert words[0] == "export", line
        variables.update(word.split("=", 1) for word in words[1:])  # type: ignore[misc]
    return variables


SERVERLESS_FIRST_RUN = """
from xor_ack_dynamodb.serverless import Pipeline

pipeline = Pipeline.from_env()
pipeline.create_table()
pipeline.sqs.create_queue(QueueName="work")
started = pipeline.start("first-root", [{"parts": []}])
print("started", started.children, started.state)
"""


def test_readme_serverless_setup_runs_in_a_bare_shell(moto_server: Any, tmp_path: Path) -> None:
    """Its export lines are all a reader sets (with the moto server of its sentence on
    our port): the pipeline builds its clients, creates its table and starts a chain.
    Without credentials in those lines botocore raised NoCredentialsError."""
    port = moto_server.endpoint_url.rsplit(":", 1)[1]
    variables = {
        k: v.replace("127.0.0.1:5000", f"127.0.0.1:{port}") for k, v in _readme_serverless_setup().items()
    }
    variables["XOR_ACK_TABLE"] = f"first-hour-{os.getpid()}"
    done = subprocess.run(
        [sys.executable, "-c", SERVERLESS_FIRST_RUN],
        env=_bare_env(tmp_path, **variables),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "started 1 pending" in done.stdout


def test_no_credentials_is_a_typed_error(moto_server: Any, tmp_path: Path) -> None:
    """The same setup without its keys: an InvalidConfig saying what to set, not
    botocore's NoCredentialsError."""
    variables = {k: v for k, v in _readme_serverless_setup().items() if "_KEY" not in k}
    port = moto_server.endpoint_url.rsplit(":", 1)[1]
    variables = {k: v.replace("127.0.0.1:5000", f"127.0.0.1:{port}") for k, v in variables.items()}
    script = """
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.serverless import Pipeline
try:
    Pipeline.from_env().create_table()
except InvalidConfig as exc:
    print(exc.code, type(exc.__cause__).__name__, exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=_bare_env(tmp_path, **variables),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("InvalidConfig NoCredentialsError "), done.stdout
    assert "AWS_ACCESS_KEY_ID" in done.stdout and "region us-east-1" in done.stdout


# -- the stream poller's region ------------------------------------------------------------


def test_stream_poller_takes_region_and_endpoint_from_the_pipelines_client(
    moto_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No AWS_REGION anywhere: the pipeline's DynamoDB client has a region and an
    endpoint, and the poller's streams client takes both from it."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "aws-config-empty"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    tracker = XorAckDynamoDB(f"poller-{os.getpid()}", client=moto_server.client(), mode="sum")
    tracker.create_table(stream=True)
    pipeline = Pipeline(tracker)
    tracker.create("root", 5)
    poller = pipeline.stream_poller()
    assert poller.poll() >= 1  # the create's stream record, read from the moto server


# -- a negative root -------------------------------------------------------------------------


@pytest.fixture
def sum_ack(inproc_client: Any) -> XorAckDynamoDB:
    ack = XorAckDynamoDB(f"negative-{os.getpid()}", client=inproc_client, mode="sum")
    ack.create_table()
    return ack


def test_sum_create_refuses_a_negative_root_before_any_request(sum_ack: XorAckDynamoDB) -> None:
    before = sum_ack.stats.requests
    with pytest.raises(errors.InvalidStamp) as caught:
        sum_ack.create("neg", -5)
    assert caught.value.tag == "neg" and caught.value.code == "InvalidStamp" and "-5" in str(caught.value)
    with pytest.raises(errors.InvalidStamp):
        sum_ack.create_many({"fine": 5, "neg": -5})
    assert sum_ack.stats.requests == before  # nothing sent, not even the good chain's
    assert sum_ack.status_many(["neg", "fine"]) == {}
    with pytest.raises(errors.InvalidStamp):
        MemoryAck(mode="sum").create("neg", -1)
    assert sum_ack.create("pos", 5) == 5  # a positive root still starts a chain


def test_spark_chain_creation_refuses_a_negative_root(sum_ack: XorAckDynamoDB) -> None:
    from xor_ack_dynamodb.spark.chains import create_chains
    from xor_ack_dynamodb.spark.tags import Group

    before = sum_ack.stats.requests
    for transactions in (False, True):
        with pytest.raises(errors.InvalidStamp):
            create_chains(
                sum_ack,
                {"neg": -5},
                Group("sum"),
                "job.1/create",
                owner="job",
                threads=1,
                transactions=transactions,
            )
    assert sum_ack.stats.requests == before


# -- the pytest plugin under an unrelated profile -----------------------------------------

PLUGIN_USER_TEST = """
from xor_ack_dynamodb import XorAckDynamoDB


def test_config(xor_ack_config):
    ack = XorAckDynamoDB.from_config(xor_ack_config)
    ack.create("file-1", 3 .to_bytes(8, "big"))
    assert ack.status("file-1").state == "pending"
"""


def test_xor_ack_config_fixture_under_an_unrelated_profile(tmp_path: Path) -> None:
    """A developer's shell with AWS_PROFILE naming a profile of another account (absent
    from the config files here): the fixture's moto server needs none of it."""
    (tmp_path / "test_user.py").write_text(textwrap.dedent(PLUGIN_USER_TEST))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:xdist"],
        cwd=tmp_path,
        env=_bare_env(tmp_path, AWS_PROFILE="work-account"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout

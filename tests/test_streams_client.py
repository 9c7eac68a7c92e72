"""The DynamoDB Streams client the serverless layer reads completions with, on the botocore
users install today.

botocore 1.44 and later send a streams call to an endpoint named after the stream ARN's
account (``<account>.streams-ddb.<region>.amazonaws.com``), which moto's in-process mock
does not serve: the serverless example and docs/lambda.md's "Testing your pipeline"
failed with ``404 ... DescribeStream ... Not yet implemented`` (issue 33). The library's
own streams client (:func:`streams_client`, what ``pipeline.stream_poller()`` and
``StreamPoller.for_table(dynamodb, None, ...)`` use) takes the DynamoDB client's region,
endpoint and credentials, and on AWS's own endpoint the regional streams endpoint, which
AWS serves beside the account-based one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import botocore
import pytest
from conftest import unique_table
from moto import mock_aws

from xor_ack_dynamodb import DynamoDBLocal, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.serverless import Completion, Pipeline, PipelineConfig, StreamPoller
from xor_ack_dynamodb.serverless.poller import streams_client

ROOT = Path(__file__).resolve().parent.parent
ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/2026-11-27T00:00:00.000"
BOTOCORE = tuple(int(p) for p in botocore.__version__.split(".")[:2])


def _url_of(streams: Any) -> str:
    """The URL ``streams`` sends a DescribeStream to (caught before it is sent)."""
    seen: list[str] = []

    class Caught(Exception):
        pass

    def catch(request: Any, **_: Any) -> None:
        seen.append(request.url)
        raise Caught

    streams.meta.events.register("before-send.dynamodb-streams.DescribeStream", catch)
    with pytest.raises(Caught):
        streams.describe_stream(StreamArn=ARN)
    return seen[0]


def test_on_aws_the_library_reads_the_regional_streams_endpoint() -> None:
    """Where botocore picks the account's endpoint for a client of your own, the
    library's client beside a DynamoDB client on AWS reads the regional one, in the
    DynamoDB client's region, whatever AWS_REGION says."""
    dynamodb = boto3.client("dynamodb", region_name="eu-west-1")
    mine = boto3.client("dynamodbstreams", region_name="eu-west-1")
    if BOTOCORE >= (1, 44):
        assert _url_of(mine) == "https://123456789012.streams-ddb.eu-west-1.amazonaws.com/"
    ours = streams_client(dynamodb)
    assert ours.meta.region_name == "eu-west-1"
    assert _url_of(ours) == "https://streams.dynamodb.eu-west-1.amazonaws.com/"


def test_a_local_endpoint_serves_both_apis_with_the_same_keys() -> None:
    dynamodb = boto3.client(
        "dynamodb",
        region_name="local",
        endpoint_url="http://127.0.0.1:8000",
        aws_access_key_id="key-a",
        aws_secret_access_key="secret-a",
    )
    streams = streams_client(dynamodb)
    assert _url_of(streams) == "http://127.0.0.1:8000/"
    frozen = streams._request_signer._credentials.get_frozen_credentials()
    assert (frozen.access_key, frozen.secret_key) == ("key-a", "secret-a")


def test_refreshable_credentials_are_shared_not_frozen() -> None:
    """A role's credentials refresh: the streams client signs with the DynamoDB client's
    credentials object itself, so a long-running poller never holds expired keys."""
    from botocore.credentials import RefreshableCredentials

    dynamodb = boto3.client("dynamodb", region_name="eu-west-1")
    keys = iter(range(10))

    def fetch() -> dict[str, str]:
        n = next(keys)
        expiry = "2000-01-01T00:00:00Z" if n == 0 else "2999-01-01T00:00:00Z"  # the first expired
        return {"access_key": f"key-{n}", "secret_key": "s", "token": "t", "expiry_time": expiry}

    refreshable = RefreshableCredentials.create_from_metadata(fetch(), fetch, "test")
    dynamodb._request_signer._credentials = refreshable
    streams = streams_client(dynamodb)
    assert streams._request_signer._credentials is refreshable
    first = streams._request_signer._credentials.get_frozen_credentials().access_key
    assert first != "key-0"  # expired at once: refreshed when read, not a copy of key-0


def _complete_one(dynamodb: Any, sqs: Any, poller: Any = None) -> list[Completion]:
    """A chain of one root and one child, finished through a pipeline; its completion
    fired by the table's stream through ``pipeline.stream_poller()``."""
    fired: list[Completion] = []
    tracker = XorAckDynamoDB(unique_table("streams"), client=dynamodb, mode="sum")
    queue = sqs.create_queue(QueueName=f"q-{tracker.table}")["QueueUrl"]
    config = PipelineConfig(queue_url=queue)
    pipeline = Pipeline(tracker, config, sqs=sqs, on_complete=[fired.append], chains=lambda tag, owner: True)
    pipeline.create_table()
    root = tracker.new_edge()
    tracker.create("root-1", root)
    assert tracker.stamp("root-1", finished=[root]).acked
    (poller or pipeline.stream_poller()).drain()
    return fired


def test_completions_fire_under_mock_aws_with_no_region_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/lambda.md's way of testing a pipeline: clients made inside ``mock_aws``,
    ``pipeline.stream_poller().drain()``; the region is the DynamoDB client's (issue 33:
    it also needed AWS_REGION)."""
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="eu-west-1")
        sqs = boto3.client("sqs", region_name="eu-west-1")
        fired = _complete_one(dynamodb, sqs)
    assert [c.tag for c in fired] == ["root-1"]


@pytest.mark.server
def test_completions_fire_on_the_moto_server(moto_server: LocalDynamoDB) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        fired = _complete_one(moto_server.client(), sqs)
    assert [c.tag for c in fired] == ["root-1"]


def test_completions_fire_on_dynamodb_local(ddblocal: DynamoDBLocal) -> None:
    """DynamoDB Local keeps one database per access key: the streams client must sign
    with the DynamoDB client's keys, not the environment's."""
    dynamodb = ddblocal.client()
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        fired = _complete_one(dynamodb, sqs)
    assert [c.tag for c in fired] == ["root-1"]


def test_a_streams_client_of_your_own_is_used_as_it_is(moto_server: LocalDynamoDB) -> None:
    dynamodb = moto_server.client()
    streams = streams_client(dynamodb)
    tracker = XorAckDynamoDB(unique_table("own"), client=dynamodb)
    tracker.create_table(stream=True)
    poller = StreamPoller.for_table(dynamodb, streams, tracker.table, lambda event, context: None)
    assert poller.streams is streams


def test_the_serverless_example_runs_as_written() -> None:
    """``python examples/serverless/run_local.py`` from a checkout, on this venv's
    botocore (the newest release in the main test leg)."""
    done = subprocess.run(
        [sys.executable, "examples/serverless/run_local.py", "--objects", "2", "--lines", "5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("acked ") == 2, done.stdout
    assert "2 completions" in done.stdout, done.stdout

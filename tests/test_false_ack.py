"""An answer that is not DynamoDB's never makes an ack, a chain, or an "ok".

A captive proxy, a misrouted load balancer or a wrong endpoint answers HTTP 200 with a
body botocore parses into a dict with none of the operation's members: ``{}``, or an
HTML page. Before the answers were checked, ``create`` returned normally on such an
endpoint, ``stamp`` returned ``00000000000000000000000000000000 acked=True`` and
``create_many`` reported ``2 ok`` (issue 40). Here every call of the tracker, in both
modes, on a client the library built and on one passed in, the table calls and the CLI,
meet a real HTTP server on 127.0.0.1 that answers so, and each raises ``BadResponse``
naming the endpoint; a batch reports every chain ``BadResponse``, none ok. The same for
answers of 300 and up that are not AWS errors (an HTML 404, an empty 404, a text/plain
403), and IAM's refusal is ``AccessDenied``, sent once, not retried.

That the check never refuses a real answer is what the contract suite shows: every call
there runs on moto, dynalite and DynamoDB Local through the same check.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from xor_ack_dynamodb import RetryPolicy, StampSpec, XorAckDynamoDB, errors
from xor_ack_dynamodb.serverless import Completion, EventBridgeTarget, SqsTarget, scan_unfinished
from xor_ack_dynamodb.stores.dynamodb.answers import checked, shape_problem
from xor_ack_dynamodb.stores.dynamodb.clients import aws_client, dynamodb_client

REGION = "us-east-1"
FAST = RetryPolicy(max_attempts=2, max_seconds=2.0, connect_timeout=0.5, read_timeout=0.5, http_attempts=1)

JSON = "application/x-amz-json-1.0"
HTML_PAGE = b"<!doctype html><html><body><h1>Welcome to the hotel network</h1></body></html>"


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every POST with the server's ``answer`` (status, content type, body),
    counting the requests it got."""

    def do_POST(self) -> None:  # every AWS JSON and query protocol request is a POST
        self.rfile.read(int(self.headers.get("content-length") or 0))
        server: Any = self.server
        server.requests += 1
        status, kind, body = server.answer
        self.send_response(status)
        if kind:
            self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_PUT = do_POST  # S3's PutObject

    def log_message(self, *args: Any) -> None:
        pass


class Endpoint:
    """A real HTTP server on 127.0.0.1 that answers what it is told to."""

    def __init__(self, answer: tuple[int, str | None, bytes]) -> None:
        self.server: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
        self.server.answer = answer
        self.server.requests = 0
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def requests(self) -> int:
        return int(self.server.requests)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


NOT_DYNAMODB_200 = {
    "json-empty": (200, JSON, b"{}"),
    "html": (200, "text/html", HTML_PAGE),
}
NOT_AWS_ERRORS = {
    "html-404": (404, "text/html", b"<html><body>Not Found</body></html>"),
    "empty-404": (404, None, b""),
    "text-403": (403, "text/plain", b"Forbidden"),
    "html-301": (301, "text/html", b"<html>Moved</html>"),
}


@pytest.fixture(params=sorted(NOT_DYNAMODB_200))
def not_dynamodb(request: pytest.FixtureRequest) -> Iterator[Endpoint]:
    endpoint = Endpoint(NOT_DYNAMODB_200[request.param])
    yield endpoint
    endpoint.close()


def passed_in(endpoint: str) -> Any:
    """A boto3 client built without the library, as a user passes one in."""
    config = Config(
        connect_timeout=0.5, read_timeout=0.5, retries={"mode": "standard", "total_max_attempts": 1}
    )
    return boto3.session.Session(region_name=REGION).client("dynamodb", endpoint_url=endpoint, config=config)


def client_for(endpoint: str, built: str) -> Any:
    if built == "library":
        return dynamodb_client(region=REGION, endpoint_url=endpoint, retry=FAST)
    return passed_in(endpoint)


def raised(call: Callable[[], object]) -> BaseException:
    try:
        returned = call()
    except Exception as exc:
        return exc
    raise AssertionError(f"returned {returned!r} from an endpoint that is not DynamoDB")


def is_bad_response(error: BaseException, endpoint: str) -> None:
    assert isinstance(error, errors.BadResponse), repr(error)
    assert error.code == "BadResponse"
    assert endpoint in str(error) and f"region {REGION}" in str(error), str(error)
    assert error.endpoint is not None and error.endpoint.startswith(endpoint)


def calls(ack: XorAckDynamoDB) -> dict[str, Callable[[], object]]:
    """Every single-chain call, with arguments that are valid for ``ack``'s mode."""
    edge = ack.new_edge()
    return {
        "create": lambda: ack.create("t", edge, op_id="c-1"),
        "create-unnamed": lambda: ack.create("t", edge),
        "stamp": lambda: ack.stamp("t", finished=[edge], op_id="s-1"),
        "stamp-unnamed": lambda: ack.stamp("t", finished=[edge]),
        "fail": lambda: ack.fail("t", reason="why"),
        "touch": lambda: ack.touch("t"),
        "status": lambda: ack.status("t"),
        "status_many": lambda: ack.status_many(["t", "u"]),
        "delete": lambda: ack.delete("t"),
        "create_table": ack.create_table,
        "scan_unfinished": lambda: list(scan_unfinished(ack)),
    }


@pytest.mark.parametrize("built", ["library", "passed-in"])
@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_no_call_decides_anything_from_a_200_that_is_not_dynamodb(
    not_dynamodb: Endpoint, mode: str, built: str
) -> None:
    ack = XorAckDynamoDB("chains", client=client_for(not_dynamodb.url, built), retry=FAST, mode=mode)
    for name, call in calls(ack).items():
        started = time.monotonic()
        error = raised(call)
        is_bad_response(error, not_dynamodb.url)
        assert time.monotonic() - started < 10, name  # not the waiter's 300 s
    edge = ack.new_edge()
    for batch in (
        lambda: ack.create_many({"a": edge, "b": ack.new_edge()}),
        lambda: ack.stamp_many([StampSpec("a", finished=(edge,)), StampSpec("b", finished=(edge,))]),
        lambda: ack.touch_many(["a", "b"]),
        lambda: ack.create_many({"a": edge, "b": ack.new_edge()}, transactions=False),
    ):
        result = batch()
        assert set(result) == {"a", "b"}
        for tag, outcome in result.items():
            assert tag in result.failed, f"{tag} reported ok: {outcome!r}"
            is_bad_response(outcome, not_dynamodb.url)


def test_a_bad_answer_is_not_retried(not_dynamodb: Endpoint) -> None:
    """An endpoint that answers so is misconfigured, not busy: one request a call."""
    ack = XorAckDynamoDB("chains", client=client_for(not_dynamodb.url, "library"), retry=RetryPolicy())
    before = not_dynamodb.requests
    is_bad_response(raised(lambda: ack.create("t", ack.new_edge())), not_dynamodb.url)
    assert not_dynamodb.requests - before == 1


@pytest.mark.parametrize("built", ["library", "passed-in"])
@pytest.mark.parametrize("answer", sorted(NOT_AWS_ERRORS))
def test_an_error_status_that_is_not_an_aws_error_is_typed(answer: str, built: str) -> None:
    endpoint = Endpoint(NOT_AWS_ERRORS[answer])
    try:
        ack = XorAckDynamoDB("chains", client=client_for(endpoint.url, built), retry=FAST)
        for call in (lambda: ack.create("t", ack.new_edge()), lambda: ack.status("t")):
            error = raised(call)
            is_bad_response(error, endpoint.url)
            assert f"HTTP {NOT_AWS_ERRORS[answer][0]}" in str(error)
        outcome = ack.create_many({"a": ack.new_edge()})["a"]
        is_bad_response(outcome, endpoint.url)
        assert outcome.code == "BadResponse"  # not counted as "ClientError:404"
    finally:
        endpoint.close()


@pytest.mark.parametrize("built", ["library", "passed-in"])
def test_iam_refusal_is_access_denied_and_not_retried(built: str) -> None:
    body = b'{"__type":"com.amazonaws.dynamodb.v20120810#AccessDeniedException","message":"not authorized"}'
    endpoint = Endpoint((400, JSON, body))
    try:
        ack = XorAckDynamoDB("chains", client=client_for(endpoint.url, built), retry=RetryPolicy())
        error = raised(lambda: ack.create("t", ack.new_edge()))
        assert isinstance(error, errors.AccessDenied) and error.code == "AccessDenied", repr(error)
        assert "dynamodb:PutItem" in str(error) and "not authorized" in str(error)
        assert endpoint.requests == 1
    finally:
        endpoint.close()


# -- the check itself, on answers a real backend gave ---------------------------------


def test_the_check_refuses_an_item_other_than_the_one_asked_for(inproc_client: Any) -> None:
    """A cached or misrouted answer about another chain is not this request's answer."""
    ack = XorAckDynamoDB("chains", client=inproc_client)
    ack.create_table()
    ack.create("a", ack.new_edge())
    ack.create("b", ack.new_edge())
    get = {
        "TableName": "chains",
        "Key": {"tagID": {"S": "a"}},
        "ConsistentRead": True,
        "ReturnConsumedCapacity": "TOTAL",
    }
    real = inproc_client.get_item(**get)
    assert shape_problem("GetItem", get, real) is None
    other = inproc_client.get_item(**{**get, "Key": {"tagID": {"S": "b"}}})
    assert "not the item asked for" in str(shape_problem("GetItem", get, other))
    batch = {"RequestItems": {"chains": {"Keys": [{"tagID": {"S": "a"}}]}}, "ReturnConsumedCapacity": "TOTAL"}
    both = inproc_client.batch_get_item(
        RequestItems={"chains": {"Keys": [{"tagID": {"S": "a"}}, {"tagID": {"S": "b"}}]}},
        ReturnConsumedCapacity="TOTAL",
    )
    assert "not asked for" in str(shape_problem("BatchGetItem", batch, both))
    elsewhere = {**real, "ConsumedCapacity": {"TableName": "other", "CapacityUnits": 0.5}}
    assert "names table 'other'" in str(shape_problem("GetItem", get, elsewhere))


# -- the command line ---------------------------------------------------------------------


def xor_ack(endpoint: str, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "xor_ack_dynamodb",
            "--table",
            "chains",
            "--region",
            REGION,
            "--endpoint-url",
            endpoint,
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("status", "t"),
        ("list",),
        ("fail", "t"),
        ("touch", "t"),
        ("delete", "t"),
        ("table", "create"),
        ("stamp", "t", "--mode", "sum", "--finish", "5"),
    ],
    ids=lambda a: a[0] if a[0] != "table" else "table-create",
)
def test_the_cli_reports_bad_response_in_one_line(args: tuple[str, ...]) -> None:
    endpoint = Endpoint(NOT_DYNAMODB_200["json-empty"])
    try:
        code, stdout, stderr = xor_ack(endpoint.url, *args)
    finally:
        endpoint.close()
    lines = stderr.strip().splitlines()
    assert code != 0, (stdout, stderr)
    assert lines and lines[-1].startswith("xor-ack: error: BadResponse: "), stderr
    assert "Traceback" not in stderr and "KeyError" not in stderr
    assert "scanned 0 items" not in stdout + stderr


# -- the serverless layer's sends -----------------------------------------------------------


def _aws(service: str, endpoint: str) -> Any:
    return aws_client(
        service,
        region=REGION,
        endpoint_url=endpoint,
        retry=FAST,
        aws_access_key_id="k",
        aws_secret_access_key="s",
    )


def test_a_completion_is_not_reported_fired_into_an_answer_that_is_not_the_services(
    not_dynamodb: Endpoint,
) -> None:
    """A completion target whose send got such an answer raises, so the firing is
    released and retried instead of marked fired (a lost completion)."""
    completion = Completion(tag="t", owner="o", mode="sum", completed_at=1.0)
    for target in (
        SqsTarget(_aws("sqs", not_dynamodb.url), f"{not_dynamodb.url}/000000000000/done"),
        EventBridgeTarget(_aws("events", not_dynamodb.url)),
    ):
        is_bad_response(raised(lambda: target(completion)), not_dynamodb.url)  # noqa: B023


def test_children_are_not_reported_sent_into_an_answer_that_is_not_the_services(
    not_dynamodb: Endpoint,
) -> None:
    """The two sends of ``send_children`` (SendMessageBatch, PutObject) as it makes
    them: checked, so a record whose children went nowhere is retried. (botocore itself
    turns an S3 200 whose body is not S3's into a 500, which is typed the same.)"""
    sqs, s3 = _aws("sqs", not_dynamodb.url), _aws("s3", not_dynamodb.url)
    batch = {"QueueUrl": f"{not_dynamodb.url}/000000000000/q", "Entries": [{"Id": "0", "MessageBody": "x"}]}
    put = {"Bucket": "b", "Key": "k", "Body": b"x"}
    for client, operation, request, send in (
        (sqs, "SendMessageBatch", batch, sqs.send_message_batch),
        (s3, "PutObject", put, s3.put_object),
    ):
        error = raised(lambda: checked(client, operation, request, send(**request)))  # noqa: B023
        is_bad_response(error, not_dynamodb.url)

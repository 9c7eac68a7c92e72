"""Every failure of the network or of a non-AWS answer surfaces as a typed error.

Each failure is made with real sockets on 127.0.0.1, never a mock of botocore: a port
nothing listens on (refused), a listener whose backlog is full (connect timeout), a
listener that accepts and never answers (read timeout), a tiny HTTP server answering
500 with an HTML page, and a mistyped region. Each is fed through the library (a tracker
on a client the library built, and on a plain boto3 client passed in), the serverless
layer (a pipeline's DynamoDB and SQS requests) and the CLI (a subprocess): each raises
an ``XorAckError`` subclass with its ``.code``, a message naming the region and the
endpoint, and botocore's exception as ``__cause__``.
"""

from __future__ import annotations

import http.server
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from xor_ack_dynamodb import RetryPolicy, XorAckDynamoDB, errors
from xor_ack_dynamodb.serverless import PipelineConfig
from xor_ack_dynamodb.stores.dynamodb.clients import aws_client, dynamodb_client
from xor_ack_dynamodb.stores.dynamodb.codec import is_transient

REGION = "us-east-1"
TYPO_REGION = "eu-wst-1"

#: A budget that gives up quickly: one HTTP attempt a request, two calls' worth of
#: attempts within two seconds.
FAST = RetryPolicy(max_attempts=2, max_seconds=2.0, connect_timeout=0.3, read_timeout=0.3, http_attempts=1)


# -- the failures, on 127.0.0.1 ---------------------------------------------------------


@pytest.fixture
def refused() -> str:
    """An endpoint on a port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def backlog_full() -> Iterator[str]:
    """A listener that never accepts, its backlog filled: a new connection's SYN is
    dropped, so connecting times out."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            try:
                filler.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(filler)
        time.sleep(0.1)
        probe = socket.socket()
        probe.settimeout(0.3)
        try:
            with pytest.raises(TimeoutError):  # the premise: connecting now times out
                probe.connect(("127.0.0.1", port))
        finally:
            probe.close()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            for filler in fillers:
                filler.close()


@pytest.fixture
def silent() -> Iterator[str]:
    """A listener that accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(5)
        for conn in held:
            conn.close()


class _Html500(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # every AWS JSON and query protocol request is a POST
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b"<!doctype html><html><body><h1>Internal Server Error</h1></body></html>"
        self.send_response(500)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def html_500() -> Iterator[str]:
    """An HTTP server answering every request 500 with an HTML page (a proxy's error
    page, or an emulator that does not serve the region)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Html500)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def plain_client(endpoint: str | None, region: str = REGION) -> Any:
    """A boto3 client built without the library, as a user passes one in."""
    config = Config(
        connect_timeout=0.3, read_timeout=0.3, retries={"mode": "standard", "total_max_attempts": 1}
    )
    return boto3.session.Session(region_name=region).client("dynamodb", endpoint_url=endpoint, config=config)


def raised(call: Callable[[], object]) -> BaseException:
    """The exception ``call`` raises (the test fails if it returns)."""
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError(f"{call} raised nothing")


def check(
    error: BaseException,
    name: str,
    endpoint: str,
    cause: type[BaseException],
    region: str = REGION,
    service: str = "DynamoDB",
) -> None:
    """``error`` is the typed error ``name``, naming the region and the endpoint, with
    botocore's exception ``cause`` as its cause."""
    assert isinstance(error, errors.XorAckError), f"untyped: {error!r}"
    assert type(error).__name__ == name and error.code == name, repr(error)
    assert isinstance(error, errors.RequestFailed)
    assert f"region {region}" in str(error) and endpoint in str(error), str(error)
    assert (error.region, error.service) == (region, service)
    assert error.endpoint is not None and error.endpoint.startswith(endpoint)
    assert isinstance(error.__cause__, cause), repr(error.__cause__)


# -- through the library ------------------------------------------------------------------

CASES = [
    ("refused", "EndpointUnreachable", EndpointConnectionError),
    ("backlog_full", "ConnectTimeout", ConnectTimeoutError),
    ("silent", "ReadTimeout", ReadTimeoutError),
    ("html_500", "BadResponse", ClientError),
]


@pytest.mark.parametrize("built", ["library", "passed-in"])
@pytest.mark.parametrize(("server", "name", "cause"), CASES, ids=[c[0] for c in CASES])
def test_tracker_calls_raise_typed_errors(
    request: pytest.FixtureRequest, server: str, name: str, cause: type[BaseException], built: str
) -> None:
    endpoint: str = request.getfixturevalue(server)
    if built == "library":
        client = dynamodb_client(region=REGION, endpoint_url=endpoint, retry=FAST)
    else:
        client = plain_client(endpoint)
    ack = XorAckDynamoDB("chains", client=client, retry=FAST, mode="sum")
    for call in (lambda: ack.stamp("t", finished=[7], op_id="op-1"), lambda: ack.status("t")):
        started = time.monotonic()
        error = raised(call)
        check(error, name, endpoint, cause)
        assert time.monotonic() - started < 10  # within the budget, not botocore's 60 s
    # What may have been applied, or was not sent, is retried within the budget (a
    # write only with the guards that recognise its first copy); an answer that is not
    # AWS's is not.
    assert is_transient(error) is (name != "BadResponse")
    # In a batch the error is that chain's outcome, typed the same.
    outcome = ack.create_many({"a": 5})["a"]
    assert type(outcome).__name__ == name and isinstance(outcome.__cause__, cause)


def test_table_calls_of_a_library_client_are_typed(refused: str, html_500: str) -> None:
    """Every operation of a client the library built, not only the tracker's."""
    for endpoint, name, cause in (
        (refused, "EndpointUnreachable", EndpointConnectionError),
        (html_500, "BadResponse", ClientError),
    ):
        client = dynamodb_client(region=REGION, endpoint_url=endpoint, retry=FAST)
        error = raised(XorAckDynamoDB("chains", client=client).create_table)
        check(error, name, endpoint, cause)
        assert getattr(error, "operation", None) == "CreateTable"


def test_a_typo_region_fails_before_any_request() -> None:
    started = time.monotonic()
    error = raised(lambda: dynamodb_client(region=TYPO_REGION))
    elapsed = time.monotonic() - started
    assert isinstance(error, errors.InvalidConfig) and error.code == "UnknownRegion", repr(error)
    message = str(error)
    assert TYPO_REGION in message and "did you mean 'eu-west-1'" in message
    assert f"https://dynamodb.{TYPO_REGION}.amazonaws.com" in message
    assert elapsed < 2, elapsed
    sqs = raised(lambda: aws_client("sqs", region=TYPO_REGION))
    assert isinstance(sqs, errors.InvalidConfig) and sqs.code == "UnknownRegion"


def test_a_typo_region_on_a_passed_in_client_fails_without_the_budget() -> None:
    """A client built elsewhere is not checked when built: its first request meets a
    name that does not resolve, and that is not retried for the budget's minute."""
    ack = XorAckDynamoDB("chains", client=plain_client(None, TYPO_REGION))
    started = time.monotonic()
    error = raised(lambda: ack.status("t"))
    assert time.monotonic() - started < 5
    assert isinstance(error, errors.InvalidConfig) and error.code == "UnknownRegion", repr(error)
    assert isinstance(error.__cause__, EndpointConnectionError)


def test_known_and_unknown_but_resolvable_regions_are_accepted(refused: str) -> None:
    """A region botocore knows is never looked up; one it does not know is accepted
    where its endpoint resolves (a region newer than botocore, a local emulator)."""
    assert dynamodb_client(region="eu-west-1").meta.region_name == "eu-west-1"
    client = dynamodb_client(region="local-test-1", endpoint_url=refused, retry=FAST)
    error = raised(lambda: XorAckDynamoDB("chains", client=client, retry=FAST).status("t"))
    check(error, "EndpointUnreachable", refused, EndpointConnectionError, region="local-test-1")


def test_unreachable_endpoint_with_the_default_budget_is_typed_and_bounded(refused: str) -> None:
    """The issue's case: botocore's EndpointConnectionError after the default budget's
    retries. Connection refused is retried (the endpoint may be restarting) within
    ``max_seconds``, then typed."""
    ack = XorAckDynamoDB("chains", client=dynamodb_client(region=REGION, endpoint_url=refused))
    started = time.monotonic()
    error = raised(lambda: ack.status("t"))
    assert time.monotonic() - started < RetryPolicy().max_seconds
    check(error, "EndpointUnreachable", refused, EndpointConnectionError)


def test_typed_errors_survive_pickling(refused: str) -> None:
    client = dynamodb_client(region=REGION, endpoint_url=refused, retry=FAST)
    error = raised(lambda: XorAckDynamoDB("chains", client=client, retry=FAST).status("t"))
    check(error, "EndpointUnreachable", refused, EndpointConnectionError)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert (copy.region, copy.endpoint, copy.operation) == (REGION, error.endpoint, "GetItem")


# -- through the serverless layer ---------------------------------------------------------


def test_serverless_dynamodb_and_sqs_requests_are_typed(
    refused: str, html_500: str, moto_server: Any
) -> None:
    queue = f"{html_500}/123456789012/work"
    config = PipelineConfig("chains", queue_url=queue, region=REGION, endpoint_url=refused, retry=FAST)
    error = raised(lambda: config.build().start("root", [{"n": 1}]))
    check(error, "EndpointUnreachable", refused, EndpointConnectionError)

    tracker = XorAckDynamoDB(f"typed-{os.getpid()}", client=moto_server.client(), mode="sum")
    tracker.create_table()
    sqs = aws_client("sqs", region=REGION, endpoint_url=html_500, retry=FAST)
    pipeline = PipelineConfig(tracker.table, queue_url=queue, region=REGION).build(tracker=tracker, sqs=sqs)
    error = raised(lambda: pipeline.start("root", [{"n": 1}]))
    check(error, "BadResponse", html_500, ClientError, service="SQS")


def test_serverless_streams_requests_are_typed(html_500: str) -> None:
    """The stream poller's client, built beside the pipeline's DynamoDB client."""
    from xor_ack_dynamodb.serverless.poller import streams_client

    streams = streams_client(dynamodb_client(region=REGION, endpoint_url=html_500, retry=FAST))
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/chains/stream/2026-01-01T00:00:00.000"
    error = raised(lambda: streams.describe_stream(StreamArn=arn))
    check(error, "BadResponse", html_500, ClientError, service="DynamoDB Streams")


def test_a_tracked_spark_outputs_s3_requests_are_typed(html_500: str) -> None:
    """The S3 client a tracked Spark write's output location builds for itself."""
    from xor_ack_dynamodb.spark.output import Location

    s3 = Location("s3://out/run-1", endpoint_url=html_500, region=REGION).client()
    error = raised(lambda: s3.get_object(Bucket="out", Key="run-1/part-0"))
    check(error, "BadResponse", html_500, ClientError, service="S3")


# -- through the CLI -------------------------------------------------------------------------


def xor_ack(*args: str) -> tuple[int, str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "xor_ack_dynamodb", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stderr, time.monotonic() - started


@pytest.mark.parametrize(
    ("server", "kind"),
    [("refused", "EndpointUnreachable"), ("html_500", "BadResponse"), (None, "UnknownRegion")],
)
def test_cli_prints_the_typed_error(request: pytest.FixtureRequest, server: str | None, kind: str) -> None:
    region = REGION if server else TYPO_REGION
    endpoint = ["--endpoint-url", request.getfixturevalue(server)] if server else []
    code, stderr, elapsed = xor_ack("--table", "chains", "--region", region, *endpoint, "status", "t")
    lines = stderr.strip().splitlines()
    assert code != 0 and len(lines) == 1, stderr
    assert lines[0].startswith(f"xor-ack: error: {kind}: "), stderr
    assert f"region {region}" in lines[0] or f"region {region!r}" in lines[0]
    assert "Traceback" not in stderr and "<!doctype" not in stderr.lower().split("(")[0]

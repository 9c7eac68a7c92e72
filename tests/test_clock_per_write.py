"""Issue 39, part 1: a write's deadline test is made with the clock as the write goes out.

A round reads the clock once, and may then wait seconds before its write: a read whose
response is lost (a read timeout and botocore's resend), a request that cannot connect
and is sent again. Each case here makes that wait real on a moto server over HTTP
(faults injected on the client's own request path, botocore's own resends included),
while the writer's and the reader's clock (one clock: no skew) moves on by the wait:
the stamp starts one second before the chain's deadline, and by the time its write goes
out, a reader has already declared the chain ``expired`` (deadline + skew passed).
The write must then be refused (``TagExpired``), and the chain must stay ``expired``,
never become ``acked`` (nor, for a touch, ``pending`` again): docs/expiry.md, "Clocks
and the skew margin".

The last tests show the bound: a write that DynamoDB tests more than ``skew`` after its
writer read the clock (a request stuck in flight) can still land on a chain a reader
has declared expired; within the bound it cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError
from botocore.httpsession import URLLib3Session
from conftest import Clock, expect, unique_table

from xor_ack_dynamodb import LocalDynamoDB, MemoryAck, StampSpec, XorAckDynamoDB, errors
from xor_ack_dynamodb.core.chain import Chain, random_op
from xor_ack_dynamodb.core.messages import Add, Extend, MarkFailed, Put, Rejected
from xor_ack_dynamodb.core.rules import ChainRules
from xor_ack_dynamodb.retry import RetryPolicy
from xor_ack_dynamodb.stores.dynamodb.clients import client_for
from xor_ack_dynamodb.stores.dynamodb.codec import RequestCodec
from xor_ack_dynamodb.stores.dynamodb.item import ItemCodec

pytestmark = pytest.mark.server

TAG = "clock/file13"
TTL = 60
SKEW = 5
#: The round's wait: a read timeout (5 s) and botocore's resend, or two connect timeouts.
SLOW = 7


class Fault:
    """One injected fault on the next request of ``operation`` on ``client``: the wait
    it stands for passes on ``clock`` (and ``during`` runs: a reader looks), then
    ``kind`` decides what botocore sees:

    * ``lost``: the server applies the request, its response is lost
      (``ConnectionClosedError``): botocore resends it (a GetItem's resend is the
      read's second attempt);
    * ``connect``: the request never left (``ConnectTimeoutError``);
    * ``throttle``: a real HTTP 400 ``ProvisionedThroughputExceededException``, nothing
      applied;
    * ``stuck``: the request is sent as usual, late (``during`` ran first): a request
      DynamoDB tests long after its writer read the clock.
    """

    def __init__(
        self, client: Any, operation: str, kind: str, clock: Clock, seconds: float, during: Callable[[], Any]
    ) -> None:
        self.kind, self.clock, self.seconds, self.during = kind, clock, seconds, during
        self.armed = True
        self.sent = 0  # requests of the operation handed to the network, resends included
        self._http = URLLib3Session()
        client.meta.events.register(f"before-send.dynamodb.{operation}", self._before_send)

    def _before_send(self, request: Any, **_: Any) -> Any:
        self.sent += 1
        if not self.armed:
            return None
        self.armed = False
        if self.kind == "lost":
            self._http.send(request)
        self.clock.advance(self.seconds)
        self.during()
        if self.kind == "lost":
            raise ConnectionClosedError(endpoint_url=request.url)
        if self.kind == "connect":
            raise ConnectTimeoutError(endpoint_url=request.url)
        if self.kind == "throttle":
            body = json.dumps(
                {
                    "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                    "message": "injected",
                }
            ).encode()
            headers = HTTPHeaders()
            headers["Content-Type"] = "application/x-amz-json-1.0"
            return AWSResponse(request.url, 400, headers, _Raw(body))
        return None  # stuck: sent now, late


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_: Any, **__: Any) -> Any:
        yield self._body


@pytest.fixture
def table(moto_server: LocalDynamoDB) -> str:
    name = unique_table("clock")
    XorAckDynamoDB(name, client=moto_server.client()).create_table()
    return name


class World:
    """A chain one second before its deadline, a writer on a client of its own (the
    one faults are injected on, which has never seen the chain) and a reader, all on
    one clock."""

    def __init__(self, moto_server: LocalDynamoDB, table: str, mode: str) -> None:
        self.clock = Clock()
        options: dict[str, Any] = {"clock": self.clock, "ttl": TTL, "skew": SKEW, "mode": mode}
        creator = XorAckDynamoDB(table, client=moto_server.client(), **options)
        self.edge = creator.new_edge()
        creator.create(TAG, self.edge)
        self.deadline = int(self.clock()) + TTL
        self.clock.advance(TTL - 1)  # the stamp starts one second before the deadline
        self.client = moto_server.client()
        self.writer = XorAckDynamoDB(table, client=self.client, **options)
        self.reader = XorAckDynamoDB(table, client=moto_server.client(), **options)
        self.seen: list[str] = []

    def look(self) -> None:
        """A reader's status() while the writer waits."""
        self.seen.append(self.reader.status(TAG).state)

    def fault(self, operation: str, kind: str, seconds: float = SLOW) -> Fault:
        return Fault(self.client, operation, kind, self.clock, seconds, self.look)

    def ends_expired(self) -> None:
        """The reader declared the chain expired during the wait, and it stays so."""
        assert self.seen == ["expired"]
        status = self.reader.status(TAG)
        assert status.state == "expired", status
        assert status.expires_at is not None and int(status.expires_at.timestamp()) == self.deadline


@pytest.fixture(params=["xor", "sum"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- the slow round ----------------------------------------------------------------------


def test_xor_stamp_whose_read_outlasts_the_deadline_does_not_ack(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """The finding: the stamp's read loses its response and botocore resends it (7 s);
    its Put was tested against the round's clock (before the deadline) and acked a
    chain the reader had declared expired. Now the Put is tested as it goes out."""
    world = World(moto_server, table, "xor")
    read = world.fault("GetItem", "lost")
    with expect(errors.TagExpired, TAG):
        world.writer.stamp(TAG, finished=[world.edge])
    assert read.sent == 2  # the read and botocore's resend: the wait was real
    world.ends_expired()
    assert world.writer.stats.requests.get("PutItem") == 1  # refused by its condition, once


class HeldResponse:
    """A TCP proxy on 127.0.0.1 in front of ``upstream`` (host, port): the first
    response of its first connection is never passed on (the client waits out its read
    timeout and botocore sends the request again, on a new connection); ``during`` runs
    in that wait. Every other byte is passed on at once."""

    def __init__(self, upstream: tuple[str, int], during: Callable[[], Any]) -> None:
        self.upstream, self.during = upstream, during
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            held = self.connections == 1
            threading.Thread(target=self._serve, args=(client, held), daemon=True).start()

    def _serve(self, client: socket.socket, held: bool) -> None:
        upstream = socket.create_connection(self.upstream)
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        if not held:
            self._pump(upstream, client)
            return
        upstream.recv(65536)  # the server answered: the answer is lost on the way back
        self.during()
        while client.recv(65536):  # until the client gives up on it
            pass
        for sock in (client, upstream):
            sock.close()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def test_xor_stamp_whose_read_times_out_does_not_ack_in_real_time(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """The finding as it happens, in real time on the real clock: the stamp starts a
    second before the deadline; its GetItem's answer is held by a proxy, so the read
    waits out its read timeout (4 s) and botocore sends it again; meanwhile a reader
    declares the chain expired (``skew`` 0 here, to keep the test short). The Put then
    goes out past the deadline: refused, and the chain stays expired."""
    options: dict[str, Any] = {"ttl": 2, "skew": 0}
    creator = XorAckDynamoDB(table, client=moto_server.client(), **options)
    reader = XorAckDynamoDB(table, client=moto_server.client(), **options)
    edge = creator.new_edge()
    creator.create(TAG, edge)
    expires = creator.status(TAG).expires_at
    assert expires is not None
    deadline = expires.timestamp()
    seen: list[str] = []

    def look() -> None:  # once the deadline's second is over: the reader's clock is past it
        time.sleep(max(0.0, deadline + 1.1 - time.time()))
        seen.append(reader.status(TAG).state)

    assert moto_server.endpoint_url is not None
    host, port = moto_server.endpoint_url.removeprefix("http://").split(":")
    proxy = HeldResponse((host, int(port)), look)
    try:
        config = dataclasses.replace(
            moto_server.config(table, retry=RetryPolicy(read_timeout=4)), endpoint_url=proxy.url
        )
        writer = XorAckDynamoDB(table, client=client_for(config), **options)
        time.sleep(max(0.0, deadline - 0.8 - time.time()))  # less than a second before it
        with expect(errors.TagExpired, TAG):
            writer.stamp(TAG, finished=[edge])
    finally:
        proxy.close()
    # The read, botocore's resend of it, the Put (refused by its condition).
    assert writer.stats.requests == {"GetItem": 2, "PutItem": 1}
    assert seen == ["expired"]
    assert reader.status(TAG).state == "expired"


@pytest.mark.parametrize("kind", ["connect", "throttle"])
def test_sum_stamp_whose_add_is_resent_late_does_not_ack(
    moto_server: LocalDynamoDB, table: str, kind: str
) -> None:
    """Sum mode: the ADD cannot connect (or is throttled) and botocore would send the
    same bytes again, their ``:now`` 7 s old. It is not resent: the library's own retry
    sends a new ADD dated with the clock as it goes out, refused at the deadline."""
    world = World(moto_server, table, "sum")
    add = world.fault("UpdateItem", kind)
    with expect(errors.TagExpired, TAG):
        world.writer.stamp(TAG, finished=[world.edge])
    assert add.sent == 2  # the first attempt, then the library's own (not botocore's copy)
    world.ends_expired()


@pytest.mark.parametrize("kind", ["connect", "throttle"])
def test_xor_put_resent_late_does_not_ack(moto_server: LocalDynamoDB, table: str, kind: str) -> None:
    """Xor mode, the Put itself: its first attempt never lands; a copy of its bytes
    would be tested 7 s late against the old reading. The library sends a new one."""
    world = World(moto_server, table, "xor")
    world.writer.status(TAG)  # the writer knows the chain: the stamp is the Put alone
    world.fault("PutItem", kind)
    with expect(errors.TagExpired, TAG):
        world.writer.stamp(TAG, finished=[world.edge])
    world.ends_expired()


@pytest.mark.parametrize("kind", ["connect", "throttle"])
def test_touch_resent_late_does_not_revive_an_expired_chain(
    moto_server: LocalDynamoDB, table: str, mode: str, kind: str
) -> None:
    """``touch()``: its Extend cannot connect (or is throttled); a copy sent 7 s later
    with the old ``:now`` would push the deadline of a chain a reader has declared
    expired an hour out (pending again). The library's own retry is refused."""
    world = World(moto_server, table, mode)
    world.fault("UpdateItem", kind)
    with expect(errors.TagExpired, TAG):
        world.writer.touch(TAG)
    world.ends_expired()


@pytest.mark.parametrize("transactions", [True, False], ids=["transactions", "single-writes"])
def test_stamp_many_whose_read_outlasts_the_deadline_does_not_ack(
    moto_server: LocalDynamoDB, table: str, mode: str, transactions: bool
) -> None:
    """A batch call: the group's reads (one BatchGetItem) lose their response and are
    resent (7 s); the writes then go out in one TransactWriteItems (or one by one),
    each tested against the clock as the transaction is sent. The chain's outcome is
    ``TagExpired``, as a single stamp's would be."""
    world = World(moto_server, table, mode)
    read = world.fault("BatchGetItem", "lost")
    results = world.writer.stamp_many([StampSpec(TAG, finished=(world.edge,))], transactions=transactions)
    assert read.sent == 2
    outcome = results[TAG]
    assert isinstance(outcome, errors.TagExpired), outcome
    world.ends_expired()
    if transactions:
        assert world.writer.stats.requests.get("TransactWriteItems") == 1


def test_fail_dated_late_still_fails_an_expired_chain(moto_server: LocalDynamoDB, table: str) -> None:
    """``fail()`` has no deadline test (a driver records why it gave up on an expired
    chain): dated late, it still fails it, and its tombstone's retention starts when it
    was sent."""
    world = World(moto_server, table, "xor")
    world.fault("UpdateItem", "connect")
    status = world.writer.fail(TAG, reason="gave up")
    assert status.state == "failed" and status.reason == "gave up"
    assert world.seen == ["expired"]


def test_memory_ack_tests_the_deadline_as_its_write_goes_out() -> None:
    """``MemoryAck`` runs the same driver: a thread descheduled between its round's read
    and its write (here the clock moves 7 s between the two readings the stamp makes:
    its round's, and its write's) is refused as a slow request is."""
    clock = Clock(1000)
    creator = MemoryAck(ttl=TTL, skew=SKEW, clock=clock)
    edge = creator.new_edge()
    creator.create(TAG, edge)  # deadline 1060
    readings = iter([1000.0 + TTL - 1])  # the stamp's round reads 1059, a second before it
    writer = MemoryAck(ttl=TTL, skew=SKEW, clock=lambda: next(readings, clock()), share=creator)
    clock.advance(TTL - 1 + SLOW)  # 1066: the reading its write is dated with
    with expect(errors.TagExpired, TAG):
        writer.stamp(TAG, finished=[edge])
    assert creator.status(TAG).state == "expired"


# -- the reader ---------------------------------------------------------------------------


class LateAnswer:
    """The next ``operation`` request on ``client`` is answered late: the server
    answers it at once, then ``during`` runs (time passes, other writers act), then the
    client gets that answer."""

    def __init__(self, client: Any, operation: str, during: Callable[[], Any]) -> None:
        self.during, self.armed = during, True
        self._http = URLLib3Session()
        client.meta.events.register(f"before-send.dynamodb.{operation}", self._before_send)

    def _before_send(self, request: Any, **_: Any) -> Any:
        if not self.armed:
            return None
        self.armed = False
        response = self._http.send(request)
        self.during()
        return response


@pytest.mark.parametrize("call", ["status", "status_many"])
def test_a_reader_judges_with_its_clock_as_its_read_goes_out(
    moto_server: LocalDynamoDB, table: str, call: str
) -> None:
    """A reader's answer arrives late: the chain it read was pending a second before
    its deadline, and a stamp acked it right after the read. Judged with the clock as
    the answer arrives (7 s later), that pending chain would read ``expired`` and the
    next read ``acked``: expired, then acked. Judged with the clock as its read went
    out, it reads ``pending``."""
    world = World(moto_server, table, "xor")
    reader = XorAckDynamoDB(table, client=moto_server.client(), clock=world.clock, ttl=TTL, skew=SKEW)

    def meanwhile() -> None:
        assert world.writer.stamp(TAG, finished=[world.edge]).acked
        world.clock.advance(SLOW)

    LateAnswer(reader.client, "GetItem" if call == "status" else "BatchGetItem", meanwhile)
    state = reader.status(TAG).state if call == "status" else reader.status_many([TAG])[TAG].state
    assert state == "pending"
    assert reader.status(TAG).state == "acked"


# -- the bound ---------------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [SKEW - 1, SKEW + 2], ids=["within", "past"])
def test_a_write_tested_late_in_flight_is_the_bound(
    moto_server: LocalDynamoDB, table: str, seconds: int
) -> None:
    """The bound of docs/expiry.md: a write's ``:now`` is read as it is sent, but the
    library cannot tell when DynamoDB tests it. ``within``: tested ``skew - 1`` seconds
    after its clock read, the write lands (the deadline had not passed when it was
    sent) and no reader has declared the chain expired yet: it ends acked, consistently.
    ``past``: tested ``skew + 2`` seconds after (a request stuck in flight longer than
    the margin), it lands all the same on a chain a reader has already declared
    expired: past the bound, the promise does not hold."""
    world = World(moto_server, table, "xor")
    world.writer.status(TAG)  # the stamp is the Put alone
    world.fault("PutItem", "stuck", seconds=seconds)
    result = world.writer.stamp(TAG, finished=[world.edge])
    assert result.acked  # it landed: sent before the deadline on its writer's clock
    assert world.seen == (["pending"] if seconds <= SKEW else ["expired"])
    assert world.reader.status(TAG).state == "acked"


# -- the request shape -----------------------------------------------------------------------


def test_a_stamp_put_tests_the_deadline_and_is_sent_once() -> None:
    """The xor stamp's Put is conditioned on the deadline as well as the token, with
    the ``:now`` it was dated with; a create's and a completion's Put are not; every
    dated write is one botocore must not resend (``Prepared.once``)."""
    from xor_ack_dynamodb.core.messages import dated, judged_at  # new: the module runs on HEAD too

    rules = ChainRules()
    codec = RequestCodec("acks", ItemCodec("tagID", "expires_at"), rules)
    old = Chain(tag=TAG, mode="xor", value=b"\x01" * 16, token=b"t" * 8, deadline=1000)
    new = Chain(tag=TAG, mode="xor", value=b"\x02" * 16, token=b"u" * 8, deadline=1000)
    stamp = codec.prepare(dated(Put(new, old, 900), 1001))
    assert stamp.once
    assert stamp.kwargs["ConditionExpression"] == "#tok = :tok AND (attribute_not_exists(#dl) OR #dl >= :now)"
    assert stamp.kwargs["ExpressionAttributeValues"][":now"] == {"N": "1001"}
    for plain in (Put(new, old), Put(new, None)):
        prepared = codec.prepare(dated(plain, 1001))
        assert not prepared.once and ":now" not in prepared.kwargs.get("ExpressionAttributeValues", {})
    for request in (Extend(TAG, 60, None, 900), MarkFailed(TAG, None, None, 900)):
        prepared = codec.prepare(dated(request, 1001))
        assert prepared.once and prepared.kwargs["ExpressionAttributeValues"][":now"] == {"N": "1001"}
    # A clock stepped back never weakens the test the call already passed.
    assert dated(Add(TAG, 1, random_op(), None, 900), 800).now == 900
    assert judged_at(Rejected(None, at=1001), 900) == 1001 and judged_at(Rejected(None), 900) == 900


# -- asyncio -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["async"])
def test_async_stamp_whose_read_outlasts_the_deadline_does_not_ack(
    moto_server: LocalDynamoDB, table: str, kind: str
) -> None:
    """The asyncio tracker (its driver is the same source): the xor stamp's read loses
    its response and aiobotocore resends it (7 s); the Put is refused at the deadline."""
    from aio_scripted import AsyncScript

    from xor_ack_dynamodb.aio import AsyncXorAckDynamoDB, async_dynamodb_client

    clock = Clock()
    options: dict[str, Any] = {"clock": clock, "ttl": TTL, "skew": SKEW}
    creator = XorAckDynamoDB(table, client=moto_server.client(), **options)
    reader = XorAckDynamoDB(table, client=moto_server.client(), **options)
    edge = creator.new_edge()
    creator.create(TAG, edge)
    clock.advance(TTL - 1)
    seen: list[str] = []

    def wait() -> None:  # runs on the loop's thread, between the read and its resend
        clock.advance(SLOW)
        seen.append(reader.status(TAG).state)

    async def main() -> None:
        async with async_dynamodb_client(
            region="us-east-1",
            endpoint_url=moto_server.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ) as client:
            writer = AsyncXorAckDynamoDB(table, client=client, **options)
            AsyncScript(client).lose("GetItem", after=wait)
            with expect(errors.TagExpired, TAG):
                await writer.stamp(TAG, finished=[edge])

    asyncio.run(main())
    assert seen == ["expired"]
    assert reader.status(TAG).state == "expired"

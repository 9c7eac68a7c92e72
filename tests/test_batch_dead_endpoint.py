"""Batch calls against an endpoint that dies (issue 40): a moto server killed mid-batch
of 10,000 chains ends ``create_many`` and ``stamp_many`` within a minute of its death
(on 9f9f177 each of the 70 groups left spent its whole retry budget: 1,022 s for
``create_many``, over 11 minutes for ``stamp_many``), with every chain reported, never
dropped and never ok unless its write landed before the death. An endpoint that
throttles, or is unreachable for one group only, is never given up on.

The server is the docs' local command, ``python -m xor_ack_dynamodb.testing.serve``, in a
child process on 127.0.0.1, SIGKILLed while the batch runs; the tracker's client is the
one a user gets (``dynamodb_client()``: 5 s timeouts, botocore's standard retries, the
default retry budget).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import unique_table
from scripted import Script

from xor_ack_dynamodb import StampSpec, XorAckDynamoDB, errors
from xor_ack_dynamodb.core.batch import BatchResult
from xor_ack_dynamodb.retry import RetryPolicy
from xor_ack_dynamodb.stores.dynamodb.clients import dynamodb_client
from xor_ack_dynamodb.testing import LocalDynamoDB

pytestmark = pytest.mark.server

N = 10_000
DEATH_AT = 3_000  # chains settled when the server is killed
WITHIN = 60.0  # seconds from the death to the batch's end
UNREACHABLE_GROUPS = 2  # groups in a row found unreachable before the rest is not sent (the docs' number)
#: What a chain may end with once the server is gone: never sent, or (a request in flight
#: at the death) an outcome that is not known.
DEAD = (errors.EndpointUnreachable, errors.ResponseLost, errors.OutcomeUnknown)


class Server:
    """``python -m xor_ack_dynamodb.testing.serve -p 0`` in a child process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xor_ack_dynamodb.testing.serve", "-p", "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, f"no endpoint in {line!r}"
        self.endpoint_url = found.group(0)
        self.killed_at: float | None = None

    def tracker(self, table: str | None = None) -> XorAckDynamoDB:
        client = dynamodb_client(
            endpoint_url=self.endpoint_url,
            region="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        return XorAckDynamoDB(table or unique_table("dead"), client=client, ttl=3600)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.killed_at = time.monotonic()


@pytest.fixture
def server() -> Iterator[Server]:
    server = Server()
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


class TooLate(Exception):
    """The batch was still running a minute after the death (raised from progress, which
    stops the batch: the test fails then instead of minutes later)."""


def kill_at(server: Server, settled: int) -> Callable[[int, int], None]:
    """A progress callback that kills ``server`` once ``settled`` chains are settled, and
    stops the batch (:class:`TooLate`) if it runs on more than :data:`WITHIN` after."""

    def progress(done: int, total: int) -> None:
        if server.killed_at is None and done >= settled:
            server.kill()
        elif server.killed_at is not None and time.monotonic() - server.killed_at > WITHIN:
            raise TooLate(f"{done} of {total} settled {time.monotonic() - server.killed_at:.0f} s after")

    return progress


def check(result: BatchResult[Any], server: Server, ended: float, tags: list[str]) -> None:
    """Every chain reported; ok only for those settled by the death (plus the groups in
    flight then); every failure one the death explains; the chains of groups never
    started reported unsent with the same typed error; the end within a minute."""
    assert server.killed_at is not None
    after = ended - server.killed_at
    assert after < WITHIN, f"{after:.1f} s after the death"
    assert list(result) == tags
    ok, failed = result.ok, result.failed
    assert len(ok) + len(failed) == N
    # Settled by the death: ok; the two groups in flight then (concurrency 2) may be too.
    assert DEATH_AT <= len(ok) <= DEATH_AT + 200, result.summary()
    assert set(ok) <= set(tags[: len(ok) + 200])
    wrong = {t: repr(e) for t, e in failed.items() if not isinstance(e, DEAD)}
    assert not wrong, list(wrong.items())[:3]
    unsent = {t: e for t, e in failed.items() if "not sent: the last" in str(e)}
    # Sent after the death: the two groups in flight then, UNREACHABLE_GROUPS more, and
    # one started beside the last of them; every later one is not sent.
    assert len(unsent) >= N - DEATH_AT - 100 * (3 + UNREACHABLE_GROUPS), result.summary()
    assert set(unsent) == set(tags[N - len(unsent) :])
    for tag, error in unsent.items():
        assert type(error) in (errors.EndpointUnreachable, errors.ConnectTimeout)
        assert error.tag == tag and isinstance(error.__cause__, errors.EndpointUnreachable)
        assert error.endpoint is not None and server.endpoint_url in error.endpoint


def test_create_many_ends_within_a_minute_of_the_servers_death(server: Server) -> None:
    ack = server.tracker()
    ack.create_table()
    tags = [f"c{i:05}" for i in range(N)]
    created = ack.create_many(
        {t: ack.new_edge() for t in tags}, concurrency=2, progress=kill_at(server, DEATH_AT)
    )
    check(created, server, time.monotonic(), tags)
    assert ack.stats.events.get("unsent", 0) == sum("not sent: the last" in str(e) for e in created.values())


def test_stamp_many_ends_within_a_minute_of_the_servers_death(server: Server) -> None:
    ack = server.tracker()
    ack.create_table()
    tags = [f"c{i:05}" for i in range(N)]
    roots = {t: ack.new_edge() for t in tags}
    assert ack.create_many(roots, concurrency=2).failed == {}
    stamper = server.tracker(ack.table)  # knows no chain: each group reads, then writes
    specs = [StampSpec(t, finished=(roots[t],), op_id=f"{t}/done") for t in tags]
    stamped = stamper.stamp_many(specs, concurrency=2, progress=kill_at(server, DEATH_AT))
    check(stamped, server, time.monotonic(), tags)
    assert all(v.acked for v in stamped.ok.values())


def raw_tracker(server: LocalDynamoDB, name: str, **options: Any) -> XorAckDynamoDB:
    """A tracker whose client does not resend: each scripted fault reaches the library."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "dynamodb",
        endpoint_url=server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )
    ack = XorAckDynamoDB(unique_table(name), client=client, ttl=3600, **options)
    ack.create_table()
    return ack


def test_throttled_groups_never_end_the_batch(moto_server: LocalDynamoDB) -> None:
    """Two groups in a row whose transactions are throttled through their whole budget,
    then a throttle a later group's retry gets past: every other chain is created, and
    nothing is left unsent (a throttle is an answer: the endpoint is alive)."""
    ack = raw_tracker(moto_server, "dead-throttle", retry=RetryPolicy(max_attempts=2, initial_wait=0.001))
    tags = [f"c{i:04}" for i in range(600)]
    script = Script(ack.client)
    script.throttle("TransactWriteItems", times=4)  # groups 0 and 1: both attempts each
    script.before("TransactWriteItems", lambda: None).throttle("TransactWriteItems")  # group 3, once
    created = ack.create_many({t: ack.new_edge() for t in tags})
    assert script.pending == 0
    assert set(created.failed) == set(tags[:200])
    assert all("Throughput" in errors_name for errors_name in created.failures_by_type())
    assert len(created.ok) == 400 and "unsent" not in ack.stats.events


def test_an_unreachable_group_between_answered_ones_never_ends_the_batch(moto_server: LocalDynamoDB) -> None:
    """Groups 0, 2 and 4 refused on every attempt of their budget, 1, 3 and 5 answered:
    no two unreachable groups in a row, so every group is sent, and the refused ones
    hold EndpointUnreachable (not sent, not applied)."""
    ack = raw_tracker(moto_server, "dead-alternate", retry=RetryPolicy(max_attempts=2, initial_wait=0.001))
    tags = [f"c{i:04}" for i in range(600)]
    script = Script(ack.client)
    for _ in range(3):
        script.refuse("TransactWriteItems", times=2).before("TransactWriteItems", lambda: None)
    created = ack.create_many({t: ack.new_edge() for t in tags})
    assert script.pending == 0
    refused = [t for n in (0, 2, 4) for t in tags[n * 100 : n * 100 + 100]]
    assert list(created.failed) == refused
    assert all(type(e) is errors.EndpointUnreachable for e in created.failed.values())
    assert "unsent" not in ack.stats.events and len(created.ok) == 300


def test_two_unreachable_groups_in_a_row_leave_the_rest_unsent(moto_server: LocalDynamoDB) -> None:
    """The rule itself, with a scripted refusal: groups 1 and 2 refused through their
    budget, then the endpoint answers again, but groups 3 to 5 are not sent: each of
    their chains holds EndpointUnreachable saying so, and none of them exists."""
    ack = raw_tracker(moto_server, "dead-rule", retry=RetryPolicy(max_attempts=2, initial_wait=0.001))
    tags = [f"c{i:04}" for i in range(600)]
    script = Script(ack.client)
    script.before("TransactWriteItems", lambda: None).refuse("TransactWriteItems", times=4)
    created = ack.create_many({t: ack.new_edge() for t in tags})
    assert script.pending == 0
    assert script.sent.count("TransactWriteItems") == 5  # group 0, then two attempts of 1 and 2
    assert list(created.ok) == tags[:100]
    assert list(created.failed) == tags[100:]
    unsent = {t: e for t, e in created.failed.items() if "not sent: the last" in str(e)}
    assert list(unsent) == tags[300:]
    assert ack.stats.events["unsent"] == 300
    assert ack.status_many(tags[100:]).missing == tags[100:]


def test_the_docs_local_command_serves_dynamodb_and_sqs_and_stops_on_sigterm(server: Server) -> None:
    """``python -m xor_ack_dynamodb.testing.serve`` (what README, cli.md, lambda.md and
    concepts.md give beside the stock ``moto_server``): DynamoDB with transactions, SQS,
    and a clean exit on SIGTERM."""
    import boto3

    ack = server.tracker()
    ack.create_table()
    created = ack.create_many({f"c{i:03}": ack.new_edge() for i in range(250)})
    assert created.failed == {} and len(created) == 250
    sqs = boto3.client("sqs", endpoint_url=server.endpoint_url, region_name="us-east-1")
    url = sqs.create_queue(QueueName="work")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="{}")
    assert len(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)["Messages"]) == 1
    # One request at a time: a long poll on an empty queue holds every other request up
    # (hence the docs' WaitTimeSeconds=0 against it).
    poll = threading.Thread(target=lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2))
    poll.start()
    time.sleep(0.3)
    started = time.monotonic()
    ack.status_many(["c000"])
    held = time.monotonic() - started
    poll.join()
    assert held > 1.0, held
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0


def test_the_embedded_server_keeps_no_copy_of_an_item(moto_server: LocalDynamoDB) -> None:
    """moto keeps every item object it builds (for its dashboard), copies included; the
    embedded server's ``UpdateItem`` and transactions of updates each copied one item that
    was never freed (the stock server copies the whole table per transaction entry and
    keeps those: 1,000 creates grew it past 2 GB). None is kept now: the items live in
    their tables only."""
    from moto.dynamodb.models.dynamo_type import Item

    ack = raw_tracker(moto_server, "dead-copies")
    roots = {f"c{i:03}": ack.new_edge() for i in range(300)}
    before = len(Item.instances_tracked)  # type: ignore[attr-defined]
    assert ack.create_many(roots).failed == {}
    assert ack.touch_many(list(roots)).failed == {}
    stamped = ack.stamp_many([StampSpec(t, finished=(v,)) for t, v in roots.items()])
    assert all(v.acked for v in stamped.values())
    assert len(Item.instances_tracked) - before == 0  # type: ignore[attr-defined]
    assert ack.status_many(list(roots)).by_state() == {"acked": list(roots)}


def test_the_watch_counts_only_groups_whose_every_chain_ended_unreachable() -> None:
    """The rule on its own: a group counts when each of its chains ended
    ``EndpointUnreachable`` or ``ConnectTimeout``; anything else (one value, a read
    timeout: maybe applied, a throttle) breaks the run; the unsent errors keep the type,
    endpoint and region of the last group's, name their own tag, and say so."""
    from xor_ack_dynamodb.core.batch import EndpointWatch

    where = {"service": "DynamoDB", "operation": "TransactWriteItems", "region": "eu-west-1"}

    def timeout(tag: str) -> errors.ConnectTimeout:
        return errors.ConnectTimeout("connect timed out", tag=tag, endpoint="http://10.0.0.9", **where)

    watch = EndpointWatch()
    assert watch.limit == UNREACHABLE_GROUPS
    watch.record([timeout("a"), errors.EndpointUnreachable("refused", tag="b")])
    assert watch.dead() is None
    watch.record([timeout("c"), errors.ReadTimeout("no answer", tag="d")])  # d may have landed
    watch.record([timeout("e")])
    assert watch.dead() is None
    last = timeout("f")
    watch.record([last])
    assert watch.dead() is last
    unsent = watch.unsent(["g", "h"], last)
    assert [type(e) for e in unsent] == [errors.ConnectTimeout] * 2
    assert [e.tag for e in unsent] == ["g", "h"]  # type: ignore[attr-defined]
    assert all(e.endpoint == "http://10.0.0.9" and e.region == "eu-west-1" for e in unsent)  # type: ignore[attr-defined]
    assert all(e.__cause__ is last and "'g' not sent" in str(unsent[0]) for e in unsent)
    watch.record([object()])  # a group that got an answer: the endpoint is back
    assert watch.dead() is None

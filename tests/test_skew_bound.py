"""Issue 39: the skew margin against one request's whole span, on the default config.

A write whose condition tests the deadline (an xor stamp's Put here) is dated with its
writer's clock read just before it is sent, and it is sent once: botocore never resends
it (``Prepared.once``), the library's own retry decides again with a fresh clock. So the
time from that reading to DynamoDB testing the condition is, for a write that is
answered at all, at most one request's whole span: the connect timeout plus the read
timeout of the tracker's client. docs/expiry.md ("Clocks and the skew margin") promises
that a chain never goes from ``expired`` to ``acked`` while that time, plus the clocks'
disagreement, stays below ``skew``.

Each case here is one clock (no disagreement), a tracker with the default ``skew`` and
``RetryPolicy`` on a moto server, and a stamp whose Put is dated exactly at the chain's
deadline (the last reading a writer accepts) and tested ``seconds`` later: at the bound
(``skew``), nothing changes for a reader until the write lands; one second past it, a
reader has declared the chain expired before the write lands, and it lands all the same.
The last case is one request's whole span: where it exceeds ``skew`` (the default today:
10 s against 5 s) an answered write can cross the bound.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Clock, unique_table

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.config import TrackerOptions
from xor_ack_dynamodb.retry import RetryPolicy

pytestmark = pytest.mark.server

TAG = "skew/bound"
TTL = 60
#: The defaults under test: the skew margin and one request's whole span.
SKEW = TrackerOptions().rules(deadline=True).skew
SPAN = sum(RetryPolicy().timeouts())


class LateTest:
    """The next ``PutItem`` of ``client`` is sent ``seconds`` late: the clock moves on by
    that much and ``during`` runs (a reader looks) before it leaves, so DynamoDB tests it
    that long after its writer read the clock."""

    def __init__(self, client: Any, clock: Clock, seconds: float, during: Any) -> None:
        self.clock, self.seconds, self.during, self.armed = clock, seconds, during, True
        client.meta.events.register("before-send.dynamodb.PutItem", self._before_send)

    def _before_send(self, **_: Any) -> None:
        if self.armed:
            self.armed = False
            self.clock.advance(self.seconds)
            self.during()


def test_one_requests_span_is_what_the_client_can_take(moto_server: LocalDynamoDB) -> None:
    """The span the cases use is the tracker's own client's: its connect timeout plus its
    read timeout, and botocore may not stretch a dated write past one attempt."""
    ack = XorAckDynamoDB(unique_table("skew"), client=moto_server.client())
    config = ack.client.meta.config
    assert config.connect_timeout + config.read_timeout == SPAN
    assert ack.rules.skew == SKEW


@pytest.mark.parametrize(
    "seconds",
    [SKEW, SKEW + 1, SPAN],
    ids=["at-the-bound", "just-past-the-bound", "one-requests-span"],
)
def test_a_write_tested_late_against_the_default_skew(moto_server: LocalDynamoDB, seconds: float) -> None:
    table = unique_table("skew")
    clock = Clock()
    XorAckDynamoDB(table, client=moto_server.client(), clock=clock, ttl=TTL).create_table()
    creator = XorAckDynamoDB(table, client=moto_server.client(), clock=clock, ttl=TTL)
    edge = creator.new_edge()
    creator.create(TAG, edge)
    writer = XorAckDynamoDB(table, client=moto_server.client(), clock=clock, ttl=TTL)
    reader = XorAckDynamoDB(table, client=moto_server.client(), clock=clock, ttl=TTL)
    writer.status(TAG)  # the writer knows the chain: its stamp is the Put alone
    clock.advance(TTL)  # now == the deadline: the last reading a writer accepts
    seen: list[str] = []
    LateTest(writer.client, clock, seconds, lambda: seen.append(reader.status(TAG).state))

    assert writer.stamp(TAG, finished=[edge]).acked  # dated at the deadline: it lands

    past = seconds > SKEW
    assert seen == (["expired"] if past else ["pending"])
    assert reader.status(TAG).state == "acked"  # past the bound: expired, then acked
    assert writer.stats.requests.get("PutItem") == 1  # one attempt: the span is one request's

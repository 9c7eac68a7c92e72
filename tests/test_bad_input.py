"""Issue 40: bad input is a typed error before any request, and nothing is written; an
item whose deadline no date can hold is a ``CorruptItem`` for that item alone.

Each case runs on ``XorAckDynamoDB`` against moto in-process and on ``MemoryAck`` where
both have the call, asserting the error's type, that the tracker sent no request
(``stats``) and that what is stored did not change (a consistent scan, or the memory
store's chains). The asyncio trackers share these code paths (the tracker methods are
generated from one source, the checks live in ``core/factory.py`` and ``config.py``).
"""

from __future__ import annotations

import math
import pickle
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import Clock, unique_table

from xor_ack_dynamodb import AckConfig, MemoryAck, RetryPolicy, StampSpec, XorAckDynamoDB
from xor_ack_dynamodb.cli import main as cli
from xor_ack_dynamodb.core.factory import MAX_DURATION, MAX_REASON, fit_reason
from xor_ack_dynamodb.errors import CorruptItem, InvalidConfig, InvalidTagType

KINDS = ["dynamodb", "memory"]

#: Durations no tracker may take: more than 100 years, not finite, not positive, not a
#: number. The first three poisoned a chain on the old code (written, then unreadable).
BAD_DURATIONS = {
    "1e12": 1e12,
    "inf": float("inf"),
    "10**400": 10**400,
    "max+1": MAX_DURATION + 1,
    "timedelta.max": timedelta.max,
    "nan": float("nan"),
    "-inf": -float("inf"),
    "0": 0,
    "-5": -5,
    "str": "60",
    "bool": True,
}


class _AnyObject:
    """A value of no accepted type, with a repr that is the same in every process (the
    test ids xdist's workers must agree on)."""

    def __repr__(self) -> str:
        return "<an object>"


ANY_OBJECT = _AnyObject()


@pytest.fixture
def table(inproc_client: Any) -> str:
    name = unique_table("bad")
    XorAckDynamoDB(name, client=inproc_client).create_table()
    return name


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(kind: str, request: pytest.FixtureRequest, clock: Clock) -> Any:
    """``make(**options)``: a tracker of the kind (DynamoDB trackers share one table)."""
    if kind == "memory":
        return lambda **options: MemoryAck(**{"clock": clock, "ttl": 3600, **options})
    client, table = request.getfixturevalue("inproc_client"), request.getfixturevalue("table")
    return lambda **options: XorAckDynamoDB(table, client=client, **{"clock": clock, **options})


@pytest.fixture
def build(kind: str) -> Any:
    """``build(**options)``: a tracker of the kind, for what its constructor refuses (no
    table: nothing is sent)."""
    if kind == "memory":
        return lambda **options: MemoryAck(**options)
    return lambda **options: XorAckDynamoDB("acks", **{"client": object(), **options})


def stored(ack: Any) -> Any:
    """Everything the tracker's store holds now."""
    if isinstance(ack, MemoryAck):
        return {tag: ack.store.peek(tag) for tag in list(ack.store._chains)}
    items = ack.client.scan(TableName=ack.table, ConsistentRead=True).get("Items", [])
    return sorted(items, key=repr)


def refused(ack: Any, error: type[Exception], call: Any, *, asks: bool = False) -> Exception:
    """Run ``call``: it must raise ``error`` with nothing written and, unless it ``asks``
    the store (a read, or a conditional write refused, is how it learns), no request."""
    before, requests = stored(ack), ack.stats.total_requests
    with pytest.raises(error) as info:
        call()
    assert asks or ack.stats.total_requests == requests, ack.stats.requests
    assert stored(ack) == before
    return info.value


# -- durations -------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", BAD_DURATIONS.values(), ids=BAD_DURATIONS)
def test_a_touch_with_a_ttl_out_of_range_is_refused_before_any_request(make: Any, ttl: object) -> None:
    """``touch(tag, ttl=1e12)`` wrote a deadline in the year 33715 and then raised
    ``ValueError``; from then on every read of the chain did. Now: ``InvalidConfig``,
    nothing sent, and the chain reads as it was."""
    ack = make()
    ack.create("t", ack.new_edge())
    was = ack.status("t")
    error = refused(ack, InvalidConfig, lambda: ack.touch("t", ttl=ttl))
    assert "ttl" in str(error)
    refused(ack, InvalidConfig, lambda: ack.touch_many(["t"], ttl=ttl))
    assert ack.status("t") == was
    assert ack.status_many(["t"])["t"] == was


@pytest.mark.parametrize("option", ["ttl", "retention"])
@pytest.mark.parametrize("value", BAD_DURATIONS.values(), ids=BAD_DURATIONS)
def test_a_tracker_with_a_duration_out_of_range_is_refused(build: Any, option: str, value: object) -> None:
    with pytest.raises(InvalidConfig, match=option):
        build(**{option: value})


@pytest.mark.parametrize("skew", [float("inf"), float("nan"), 3601, -1, "5"], ids=repr)
def test_a_skew_out_of_range_is_refused(build: Any, skew: object) -> None:
    with pytest.raises(InvalidConfig, match="skew"):
        build(skew=skew)


def test_the_longest_durations_are_kept_and_read(make: Any, clock: Clock) -> None:
    """The documented maximum (100 years) for ``ttl``, ``retention`` and a touch: every
    deadline and purge time written stays readable."""
    ack = make(ttl=MAX_DURATION, retention=timedelta(days=36_525), skew=3600)
    edge = ack.new_edge()
    ack.create("long", edge)
    status = ack.touch("long", ttl=timedelta(days=36_525))
    assert status.expires_at == datetime.fromtimestamp(clock.now + MAX_DURATION, tz=UTC)
    failed = ack.fail("long", "gave up")
    assert failed.state == "failed" and failed.expires_at is not None
    assert failed.expires_at.year < 9999
    assert ack.status_many(["long"])["long"] == failed


# -- items whose deadline cannot be read ----------------------------------------------


@pytest.mark.parametrize(
    "attribute",
    [{"deadline": 10**15}, {"expires_at": 10**15}, {"deadline": 1_767_225_600_000}, {"deadline": -(10**12)}],
    ids=["deadline-1e15", "ttl-1e15", "deadline-in-ms", "deadline-before-year-1"],
)
def test_an_item_whose_deadline_no_date_holds_is_corrupt_for_itself_alone(
    table: str, inproc_client: Any, attribute: dict[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """An item another writer (or an older version) left with such a deadline: status
    raises ``CorruptItem`` naming it, status_many reports it ``corrupt`` and returns the
    others, a create on its tag writes nothing, and ``xor-ack list``/``status`` go on."""
    ack = XorAckDynamoDB(table, client=inproc_client)
    ack.create("good", ack.new_edge())
    item = {"tagID": {"S": "bad"}, "stamp": {"B": b"\x01" * 16}, "state": {"S": "pending"}}
    item.update({name: {"N": str(value)} for name, value in attribute.items()})
    inproc_client.put_item(TableName=table, Item=item)

    with pytest.raises(CorruptItem) as info:
        ack.status("bad")
    assert info.value.tag == "bad" and str(next(iter(attribute.values()))) in str(info.value)
    found = ack.status_many(["good", "bad", "none"])
    assert (found["good"].state, found["bad"].state, found.missing) == ("pending", "corrupt", ["none"])
    assert found["bad"].expires_at is None and found["bad"].reason is not None
    refused(ack, CorruptItem, lambda: ack.stamp("bad", b"\x01" * 16), asks=True)
    refused(ack, CorruptItem, lambda: ack.create("bad", ack.new_edge()), asks=True)
    ack.delete("bad")  # an operator's way out: delete needs no reading
    inproc_client.put_item(TableName=table, Item=item)

    capsys.readouterr()
    assert cli(["--table", table, "list", "--json"]) == 1  # goes on; 1: something was unreadable
    out, err = capsys.readouterr()
    assert '"tag": "good"' in out and '"bad"' not in out
    assert "CorruptItem" in err and "1 unreadable" in err
    assert cli(["--table", table, "status", "good", "bad", "--json"]) == 1
    out, err = capsys.readouterr()
    assert '"state": "pending"' in out and '"state": "corrupt"' in out and "CorruptItem" in err


def test_the_cli_refuses_a_huge_ttl_before_writing(
    table: str, inproc_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``xor-ack touch --ttl 1e12`` wrote, then failed; the chain was unreadable since."""
    ack = XorAckDynamoDB(table, client=inproc_client)
    ack.create("t", ack.new_edge())
    before = stored(ack)
    assert cli(["--table", table, "touch", "t", "--ttl", "1e12"]) == 2
    assert "InvalidConfig" in capsys.readouterr().err
    assert stored(ack) == before
    assert cli(["--table", table, "status", "t"]) == 0


# -- batches ---------------------------------------------------------------------------


def test_create_many_refuses_a_tag_named_twice_naming_it(make: Any) -> None:
    """``create_many([("a", e), ("a", e)])`` raised ``AttributeError``: pairs are taken
    (as ``dict()`` takes them), and a tag named twice is ``InvalidConfig`` naming it."""
    ack = make()
    edge, other = ack.new_edge(), ack.new_edge()
    error = refused(ack, InvalidConfig, lambda: ack.create_many([("a", edge), ("b", other), ("a", edge)]))
    assert error.tag == "a" and "'a'" in str(error)  # type: ignore[attr-defined]
    for bad in (5, "ab", [("a",)], [("a", edge, "x")], [object()]):
        refused(ack, InvalidConfig, lambda bad=bad: ack.create_many(bad))
    refused(ack, InvalidTagType, lambda: ack.create_many([(["a"], edge)]))
    created = ack.create_many([("a", edge), ("b", other)], op_ids={"a": "op-a"})
    assert list(created) == ["a", "b"] and not created.failed
    assert ack.create_many([("a", edge)], op_ids={"a": "op-a"})["a"].duplicate


def test_stamp_many_and_touch_many_refuse_a_chain_named_twice_naming_it(make: Any) -> None:
    """Documented: one stamp per chain in a batch (a transaction cannot write one item
    twice: combine its edges into one spec), one touch per chain."""
    ack = make()
    root, child = ack.new_edge(), ack.new_edge()
    ack.create("a", root)
    twice = [StampSpec("a", finished=(root,), started=(child,)), StampSpec("a", finished=(child,))]
    error = refused(ack, InvalidConfig, lambda: ack.stamp_many(twice))
    assert error.tag == "a" and "'a'" in str(error)  # type: ignore[attr-defined]
    error = refused(ack, InvalidConfig, lambda: ack.touch_many(["a", "b", "a"]))
    assert error.tag == "a"  # type: ignore[attr-defined]
    refused(ack, InvalidTagType, lambda: ack.stamp_many([StampSpec(["a"], root)]))  # type: ignore[arg-type]
    combined = StampSpec("a", finished=(root, child), started=(child,))
    assert ack.stamp_many([combined])["a"].acked


# -- failure reasons -------------------------------------------------------------------


@pytest.mark.parametrize("size", [MAX_REASON + 1, 500_000])
def test_a_reason_over_the_limit_is_refused_never_cut(make: Any, size: int) -> None:
    """``fail(tag, reason=<500 KB>)`` kept 1,024 characters and said nothing."""
    ack = make()
    ack.create("t", ack.new_edge())
    error = refused(ack, InvalidConfig, lambda: ack.fail("t", "r" * size))
    assert str(MAX_REASON) in str(error) and error.tag == "t"  # type: ignore[attr-defined]
    assert ack.status("t").state == "pending"
    refused(ack, InvalidConfig, lambda: ack.fail("t", "lone \ud800 surrogate"))
    refused(ack, InvalidConfig, lambda: ack.fail("t", b"bytes"))


def test_an_owner_that_is_not_valid_unicode_is_refused(make: Any) -> None:
    """DynamoDB stores UTF-8: a lone surrogate could not be sent (or, in memory, would be
    kept where DynamoDB could not keep it)."""
    ack = make()
    refused(ack, InvalidConfig, lambda: ack.create("t", ack.new_edge(), owner="job \udfff"))
    ack.create("t", ack.new_edge(), owner="job")
    refused(ack, InvalidConfig, lambda: ack.fail("t", "why", owner="job \udfff"))
    refused(ack, InvalidConfig, lambda: ack.touch("t", owner="\ud800"))


def test_a_reason_at_the_limit_is_kept_whole_and_fit_reason_says_where_it_cut(make: Any) -> None:
    ack = make()
    ack.create("whole", ack.new_edge())
    ack.create("fitted", ack.new_edge())
    reason = "é" * MAX_REASON
    assert ack.fail("whole", reason).reason == reason
    assert ack.status("whole").reason == reason
    long = "x" * 500_000
    fitted = fit_reason(long)
    assert len(fitted) == MAX_REASON and fitted.startswith("x" * 900) and "500000 characters" in fitted
    assert ack.fail("fitted", fitted).reason == fitted
    assert fit_reason(reason) is reason


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        dict(table=5),
        dict(table="ab"),
        dict(table="has space"),
        dict(table="acks\n"),
        dict(partition_key=""),
        dict(partition_key=5),
        dict(region=5),
        dict(region="not a region!"),
        dict(endpoint_url="nowhere"),
        dict(endpoint_url=8000),
        dict(ttl_seconds=1e12),
        dict(ttl_seconds=float("inf")),
        dict(ttl_seconds=float("nan")),
        dict(ttl_seconds="60"),
        dict(retention_seconds=0),
        dict(retention_seconds=10**400),
        dict(delete_on_ack="yes"),
        dict(max_ops=0),
        dict(max_ops=2.5),
        dict(mode="and"),
        dict(skew_seconds=-1),
        dict(skew_seconds=math.inf),
        dict(edge_size=0),
        dict(edge_size=True),
        dict(edge_size=2000),
        dict(retry="fast"),
        dict(aws_access_key_id="testing"),
        dict(aws_secret_access_key="testing"),
        dict(aws_access_key_id=5, aws_secret_access_key="testing"),
    ],
    ids=lambda field: "-".join(f"{k}={v!r}"[:40] for k, v in field.items()),
)
def test_every_ack_config_field_is_checked_when_the_config_is_made(field: dict[str, Any]) -> None:
    """``AckConfig(table=5)`` was accepted (and failed later, on an executor)."""
    values = {"table": "acks", **field}
    with pytest.raises(InvalidConfig):
        AckConfig(**values)


def test_a_good_ack_config_is_unchanged() -> None:
    config = AckConfig(
        "acks.prod-1_x",
        region="eu-west-3",
        endpoint_url="http://127.0.0.1:8000",
        ttl_seconds=timedelta(days=36_525).total_seconds(),
        skew_seconds=0,
        edge_size=1024,
        retry=RetryPolicy(max_attempts=2),
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    assert pickle.loads(pickle.dumps(config)) == config
    assert AckConfig("acks", region="").region == ""  # empty: unset, as botocore takes it


@pytest.mark.parametrize(
    "options",
    [
        dict(delete_on_ack="yes"),
        dict(cache_size=-1),
        dict(cache_size="10"),
        dict(edge_size=True),
        dict(edge_size=1025),
        dict(retry="fast"),
        dict(clock=5),
        dict(max_ops=True),
    ],
    ids=repr,
)
def test_every_tracker_option_is_checked(build: Any, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfig):
        build(**options)


def test_an_unknown_keyword_is_a_typed_error_saying_what_was_meant(build: Any, kind: str) -> None:
    with pytest.raises(InvalidConfig, match="did you mean 'retention'"):
        build(retension=60)
    if kind == "memory":
        with pytest.raises(InvalidConfig, match="takes no keyword 'region'"):
            build(region="us-east-1")


@pytest.mark.parametrize(
    "options",
    [
        dict(buckets=1),
        dict(buckets=10_001),
        dict(buckets=2.0),
        dict(on_acked="print"),
        dict(share=ANY_OBJECT),
    ],
    ids=repr,
)
def test_memory_ack_arguments_are_checked(options: dict[str, Any]) -> None:
    """(10,001 buckets: the old code made them all; 10**9 took the machine's memory.)"""
    with pytest.raises(InvalidConfig):
        MemoryAck(**options)


# -- client settings -------------------------------------------------------------------


def test_the_tracker_takes_the_client_settings_ack_config_takes(inproc_client: Any, table: str) -> None:
    """``XorAckDynamoDB("acks", region=...)`` raised ``TypeError``: it builds its client
    from them, as ``from_config`` does from the same fields of an ``AckConfig``."""
    ack = XorAckDynamoDB(
        table,
        region="eu-west-3",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="key",
        aws_secret_access_key="secret",
    )
    assert (ack.client.meta.region_name, ack.client.meta.endpoint_url) == ("eu-west-3", "http://127.0.0.1:9")
    assert ack.client._request_signer._credentials.access_key == "key"
    config = AckConfig(table, region="eu-west-3", endpoint_url="http://127.0.0.1:9")
    same = XorAckDynamoDB.from_config(config)
    assert (same.client.meta.region_name, same.client.meta.endpoint_url) == (
        "eu-west-3",
        "http://127.0.0.1:9",
    )
    regional = XorAckDynamoDB(table, region="us-east-1")  # moto in-process answers AWS's endpoint
    regional.create("t", regional.new_edge())
    assert XorAckDynamoDB(table, client=inproc_client).status("t").state == "pending"


@pytest.mark.parametrize(
    "settings",
    [
        dict(region=5),
        dict(region="no such region!"),
        dict(endpoint_url="nowhere"),
        dict(aws_access_key_id="only-one"),
        dict(client=ANY_OBJECT, region="us-east-1"),
        dict(client=ANY_OBJECT, endpoint_url="http://127.0.0.1:9"),
        dict(client=ANY_OBJECT, table="acks\n"),  # a trailing newline passed the old check
    ],
    ids=repr,
)
def test_bad_client_settings_are_typed_errors(settings: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfig):
        XorAckDynamoDB(**{"table": "acks", **settings})


@pytest.mark.parametrize("flavour", ["async"])  # the id marks it aio: the async leg runs it
def test_the_asyncio_tracker_takes_the_same_client_settings(flavour: str) -> None:
    from xor_ack_dynamodb.aio import AsyncXorAckDynamoDB

    ack = AsyncXorAckDynamoDB("acks", region="eu-west-3", endpoint_url="http://127.0.0.1:9")
    assert ack._settings is not None
    assert (ack._settings.region, ack._settings.endpoint_url) == ("eu-west-3", "http://127.0.0.1:9")
    for settings in (dict(client=object(), region="us-east-1"), dict(region=5), dict(aws_access_key_id="x")):
        with pytest.raises(InvalidConfig):
            AsyncXorAckDynamoDB("acks", **settings)

"""The error hierarchy: one base, ``.code`` equal to the class name, ``.tag``, the
ValueError/TypeError subclassing of bad input, and pickling (errors cross processes)."""

from __future__ import annotations

import inspect
import pickle

import pytest

from xor_ack_dynamodb import errors

#: Every public error, with the built-in exception a caller may also catch it as.
EXPECTED_BASES: dict[str, tuple[type[BaseException], ...]] = {
    "BufferLengthsUnequal": (ValueError,),
    "LessThanTwoBuffers": (ValueError,),
    "ZeroBufferNoOp": (ValueError,),
    "InvalidTag": (ValueError,),
    "InvalidTagType": (ValueError, TypeError),
    "InvalidStamp": (ValueError,),
    "InvalidStampType": (ValueError, TypeError),
    "InvalidConfig": (ValueError,),
    "StaleLocalData": (),
    "TagExists": (),
    "TagNotFound": (),
    "TagFailed": (),
    "TagExpired": (),
    "TagAcked": (),
    "TableNotFound": (),
    "TableSchemaMismatch": (),
    "CorruptItem": (),
    "UnmigratedItem": (errors.CorruptItem,),
    "BatchIncomplete": (),
    "OpIdReused": (ValueError,),
    "NotOwner": (),
    "ChainModeMismatch": (),
    "OutcomeUnknown": (),
    "UnknownRegion": (ValueError,),
    "RequestFailed": (),
    "EndpointUnreachable": (),
    "ConnectTimeout": (),
    "ResponseLost": (),
    "ReadTimeout": (),
    "BadResponse": (),
    "AccessDenied": (),
}

#: The Node package's six, which must keep their names and codes.
NODE_CODES = [
    "BufferLengthsUnequal",
    "LessThanTwoBuffers",
    "StaleLocalData",
    "TagExists",
    "TagNotFound",
    "ZeroBufferNoOp",
]


def test_every_error_is_listed() -> None:
    public = {
        name
        for name, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, errors.XorAckError) and obj is not errors.XorAckError
    }
    assert public == set(EXPECTED_BASES)
    assert set(errors.__all__) == set(EXPECTED_BASES) | {"XorAckError"}
    assert set(NODE_CODES) <= public


@pytest.mark.parametrize("name", sorted(EXPECTED_BASES))
def test_code_tag_and_bases(name: str) -> None:
    cls = getattr(errors, name)
    err = cls("something happened", tag="database/file13")
    assert isinstance(err, errors.XorAckError)
    assert isinstance(err, Exception)
    assert err.code == name
    assert err.tag == "database/file13"
    assert str(err) == "something happened"
    for base in EXPECTED_BASES[name]:
        assert isinstance(err, base), f"{name} should be a {base.__name__}"
    if not EXPECTED_BASES[name]:
        assert not isinstance(err, (ValueError, TypeError)), f"{name} is not bad input"
    untagged = cls("no tag")
    assert untagged.tag is None and untagged.code == name


@pytest.mark.parametrize("name", sorted(EXPECTED_BASES))
def test_errors_survive_pickling(name: str) -> None:
    cls = getattr(errors, name)
    err = cls("lost at sea", tag="t/1")
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is cls
    assert str(copy) == "lost at sea"
    assert copy.tag == "t/1"
    assert copy.code == name


def test_tag_failed_keeps_its_reason() -> None:
    err = errors.TagFailed("chain 't' has failed: boom", tag="t", reason="boom")
    assert err.reason == "boom"
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is errors.TagFailed
    assert (copy.tag, copy.reason, copy.code) == ("t", "boom", "TagFailed")
    assert str(copy) == "chain 't' has failed: boom"
    assert errors.TagFailed("x").reason is None


def test_code_is_the_subclass_name_even_for_subclasses() -> None:
    assert errors.InvalidTagType("x").code == "InvalidTagType"
    assert isinstance(errors.InvalidTagType("x"), errors.InvalidTag)
    assert isinstance(errors.InvalidStampType("x"), errors.InvalidStamp)


def test_catching_by_base_class() -> None:
    with pytest.raises(errors.XorAckError):
        raise errors.TagExpired("late", tag="t")
    with pytest.raises(ValueError):
        raise errors.ZeroBufferNoOp("zero")
    with pytest.raises(TypeError):
        raise errors.InvalidStampType("not bytes")

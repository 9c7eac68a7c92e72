"""Stamps: xor(), Stamp.acked, new_stamp(), derive_edge() and the input checks."""

from __future__ import annotations

import secrets

import pytest

from xor_ack_dynamodb import Stamp, derive_edge, errors, new_stamp, xor
from xor_ack_dynamodb.stamps import MAX_STAMP_BYTES, MAX_TAG_BYTES, as_bytes, check_tag, xor_all


def h(hex_digits: str) -> bytes:
    return bytes.fromhex(hex_digits)


# -- xor ---------------------------------------------------------------------------------


def test_seed_readme_arithmetic() -> None:
    """The Node README's bytes: file 29, words 25 a9 e9, their XOR 4c, then 65, 40, e9, 00."""
    file_stamp, w1, w2, w3 = h("29"), h("25"), h("a9"), h("e9")
    assert xor(file_stamp, w1, w2, w3) == h("4c")
    state = xor(h("29"), h("4c"))
    assert state == h("65") and not state.acked
    state = xor(state, w1)
    assert state == h("40") and not state.acked
    state = xor(state, w2)
    assert state == h("e9") and not state.acked
    state = xor(state, w3)
    assert state == h("00") and state.acked


def test_xor_returns_a_stamp_and_is_commutative() -> None:
    a, b, c = new_stamp(8), new_stamp(8), new_stamp(8)
    result = xor(a, b, c)
    assert type(result) is Stamp
    assert result == xor(c, a, b) == xor(b, c, a)
    assert xor(a, a).acked
    assert xor(a, b, a, b).acked
    assert xor(a, b, b) == a


@pytest.mark.parametrize("args", [(), (b"\x01",)], ids=["zero", "one"])
def test_xor_needs_two_buffers(args: tuple[bytes, ...]) -> None:
    with pytest.raises(errors.LessThanTwoBuffers) as info:
        xor(*args)
    assert info.value.code == "LessThanTwoBuffers"
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, errors.XorAckError)
    assert str(len(args)) in str(info.value)


def test_xor_refuses_unequal_lengths() -> None:
    with pytest.raises(errors.BufferLengthsUnequal) as info:
        xor(b"\x01\x02", b"\x01")
    assert info.value.code == "BufferLengthsUnequal"
    assert isinstance(info.value, ValueError)
    with pytest.raises(errors.BufferLengthsUnequal):
        xor(b"\x01", b"\x02", b"\x03\x04")


@pytest.mark.parametrize("bad", ["29", 41, None, [1], 1.5], ids=["str", "int", "None", "list", "float"])
def test_xor_refuses_values_that_are_not_bytes_like(bad: object) -> None:
    with pytest.raises(errors.InvalidStampType) as info:
        xor(b"\x01", bad)  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, errors.InvalidStamp)
    assert info.value.code == "InvalidStampType"


def test_xor_accepts_every_bytes_like_type() -> None:
    result = xor(b"\x0f\xf0", bytearray(b"\xff\x00"), memoryview(b"\x00\xff"))
    assert result == b"\xf0\x0f"
    assert type(result) is Stamp


def test_xor_of_empty_values_is_an_empty_stamp() -> None:
    assert xor(b"", b"") == Stamp(b"")


def test_xor_all_takes_one_or_more() -> None:
    assert xor_all([b"\x29"]) == b"\x29"
    assert xor_all(iter([b"\x29", b"\x4c"])) == b"\x65"
    with pytest.raises(errors.LessThanTwoBuffers):
        xor_all([])


# -- Stamp -------------------------------------------------------------------------------


def test_stamp_acked_and_equality() -> None:
    assert Stamp(b"\x00\x00").acked
    assert not Stamp(b"\x00\x01").acked
    assert not Stamp(b"\x80").acked
    assert Stamp(b"\x29") == b"\x29"
    assert isinstance(Stamp(b"\x29"), bytes)
    assert repr(Stamp(b"\x00")) == "Stamp('00', acked=True)"
    assert repr(Stamp(b"\x29")) == "Stamp('29', acked=False)"
    with pytest.raises(AttributeError):
        Stamp(b"\x01").extra = 1  # type: ignore[attr-defined]


# -- new_stamp ---------------------------------------------------------------------------


def test_new_stamp_default_and_sizes() -> None:
    assert len(new_stamp()) == 16
    for size in (1, 8, 64, MAX_STAMP_BYTES):
        stamp = new_stamp(size)
        assert type(stamp) is Stamp and len(stamp) == size and not stamp.acked


def test_new_stamp_is_never_zero_and_uses_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = iter([b"\x00", b"\x00", b"\x07"])
    calls: list[int] = []

    def token_bytes(n: int) -> bytes:
        calls.append(n)
        return next(draws)

    monkeypatch.setattr(secrets, "token_bytes", token_bytes)
    assert new_stamp(1) == b"\x07"
    assert calls == [1, 1, 1]  # it drew from secrets, and drew again past the zeros


def test_new_stamps_are_distinct() -> None:
    stamps = {new_stamp(8) for _ in range(1000)}
    assert len(stamps) == 1000


@pytest.mark.parametrize("size", [0, -1, MAX_STAMP_BYTES + 1, 1.0, True, "16"])
def test_new_stamp_refuses_bad_sizes(size: object) -> None:
    with pytest.raises(errors.InvalidStamp) as info:
        new_stamp(size)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


# -- derive_edge -------------------------------------------------------------------------


def test_derive_edge_is_deterministic_and_key_dependent() -> None:
    parent = h("00112233445566778899aabbccddeeff")
    first = derive_edge(b"run-1", parent, 3)
    assert type(first) is Stamp and len(first) == len(parent) and not first.acked
    assert derive_edge(b"run-1", parent, 3) == first
    assert derive_edge(b"run-2", parent, 3) != first
    assert derive_edge(b"run-1", parent, 4) != first
    assert derive_edge(b"run-1", xor(parent, h("01" + "00" * 15)), 3) != first
    assert derive_edge(b"run-1", parent, "3") != first
    assert derive_edge(b"run-1", parent, "3") == derive_edge(b"run-1", parent, b"3")
    children = {derive_edge(b"k", parent, i) for i in range(500)}
    assert len(children) == 500


def test_derive_edge_fixed_value() -> None:
    """Stable across machines and releases: a recomputed Spark partition depends on it."""
    import hashlib

    parent = h("29" * 8)
    edge = derive_edge(b"key", parent, 7)
    manual = hashlib.blake2b(digest_size=8, key=b"key")
    manual.update(parent)
    manual.update((8).to_bytes(4, "big"))
    manual.update((7).to_bytes(8, "big", signed=True))
    assert edge == manual.digest()


@pytest.mark.parametrize("parent", [b"", b"\x01" * 65])
def test_derive_edge_refuses_parent_sizes(parent: bytes) -> None:
    with pytest.raises(errors.InvalidStamp):
        derive_edge(b"k", parent, 0)


# -- input checks ------------------------------------------------------------------------


def test_check_tag_boundaries() -> None:
    assert check_tag("database/file13") == "database/file13"
    assert check_tag("x" * MAX_TAG_BYTES) == "x" * MAX_TAG_BYTES
    assert check_tag("é" * (MAX_TAG_BYTES // 2)) == "é" * 1024  # 2048 bytes of UTF-8
    with pytest.raises(errors.InvalidTag):
        check_tag("x" * (MAX_TAG_BYTES + 1))
    with pytest.raises(errors.InvalidTag):
        check_tag("é" * 1024 + "x")  # 1025 characters but 2049 bytes
    with pytest.raises(errors.InvalidTag):
        check_tag("")
    with pytest.raises(errors.InvalidTag):
        check_tag("bad\ud800")
    for bad in (None, 13, b"tag", ["t"]):
        with pytest.raises(errors.InvalidTagType) as info:
            check_tag(bad)
        assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_as_bytes_boundaries() -> None:
    assert as_bytes(bytearray(b"\x01")) == b"\x01" and type(as_bytes(memoryview(b"\x01"))) is bytes
    assert len(as_bytes(b"\x01" * MAX_STAMP_BYTES)) == MAX_STAMP_BYTES
    with pytest.raises(errors.InvalidStamp) as info:
        as_bytes(b"\x01" * (MAX_STAMP_BYTES + 1), tag="t")
    assert info.value.tag == "t" and not isinstance(info.value, TypeError)
    with pytest.raises(errors.InvalidStamp):
        as_bytes(b"")
    with pytest.raises(errors.InvalidStampType) as type_info:
        as_bytes("29", tag="t")
    assert type_info.value.tag == "t"

"""Tags and edges of tracked runs, without Spark: keys escaped into valid UTF-8 and back,
tags unique per tracking object and unambiguous, edges deterministic and distinct."""

from __future__ import annotations

import os
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xor_ack_dynamodb.errors import InvalidConfig, InvalidTag
from xor_ack_dynamodb.spark.tags import EdgeKey, TagScheme, escape_key, unescape_key
from xor_ack_dynamodb.stamps import check_tag


def test_escape_keeps_readable_keys_readable() -> None:
    assert escape_key("wc/notes/2020/café crème.txt") == "wc/notes/2020/café crème.txt"
    assert escape_key("100% done") == "100%25 done"
    assert escape_key(b"r\xe9sum\xe9.txt") == "r%E9sum%E9.txt"
    # A file name that is not UTF-8, as Python's os functions give it (surrogateescape):
    assert escape_key(os.fsdecode(b"/in/r\xe9sum\xe9.txt")) == "/in/r%E9sum%E9.txt"


@given(st.binary(max_size=64))
def test_escaping_bytes_is_reversible_and_valid_utf8(raw: bytes) -> None:
    text = escape_key(raw)
    text.encode("utf-8")  # never raises: a valid tag
    assert unescape_key(text) == raw


@given(st.text(max_size=40))
def test_escaping_text_is_reversible(key: str) -> None:
    assert unescape_key(escape_key(key)) == key.encode("utf-8", "surrogatepass")


def test_tags_are_unique_per_scheme_and_unambiguous() -> None:
    a, b = TagScheme("nightly"), TagScheme("nightly")
    assert a.nonce != b.nonce and a.tag("x", 1) != b.tag("x", 1)
    # attempt 2 of "x" is not attempt 1 of "x#2" (the old "<key>#<attempt>" clash)
    assert a.tag("x", 2) != a.tag("x#2", 1)
    # The run id holds no "/": split on its first three, a tag gives its parts back.
    assert a.tag("dir/x#2", 3).split("/", 3) == ["nightly", a.nonce, "3", "dir/x#2"]
    odd = TagScheme("a/b%c", "0123456789abcdef")
    assert odd.tag("k", 1) == "a%2Fb%25c/0123456789abcdef/1/k"
    assert odd.tag("k/1/z", 12).split("/", 3) == ["a%2Fb%25c", "0123456789abcdef", "12", "k/1/z"]


def test_bad_schemes_and_long_keys_are_refused() -> None:
    with pytest.raises(InvalidConfig):
        TagScheme("")
    with pytest.raises(InvalidConfig):
        TagScheme("r", "not-hex")
    with pytest.raises(InvalidConfig):
        TagScheme("r").tag("x", 0)
    with pytest.raises(InvalidTag):
        TagScheme("r").tag("k" * 2100, 1)
    check_tag(TagScheme("r").tag(b"\xff" * 600, 1))  # escaped: 1800 bytes, still a tag


@pytest.mark.parametrize("size", [8, 16, 24])
def test_root_edges_are_keyed_deterministic_and_never_zero(size: int) -> None:
    key = EdgeKey(os.urandom(32), size)
    edges = [key.root(f"tag{i}") for i in range(200)]
    assert len(set(edges)) == 200 and all(0 < e < 1 << (8 * size) for e in edges)
    again = pickle.loads(pickle.dumps(key))
    assert [again.root(f"tag{i}") for i in range(200)] == edges
    other = EdgeKey(os.urandom(32), size)
    assert set(other.root(f"tag{i}") for i in range(200)).isdisjoint(edges)
    with pytest.raises(InvalidConfig):
        EdgeKey(os.urandom(32), 12)
    with pytest.raises(InvalidConfig):
        EdgeKey(b"short", size)



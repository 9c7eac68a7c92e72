"""Each tracker method's parameters are written once (drivers/base.py, ``signed``), yet a
user sees them as before: ``help()`` and ``inspect.signature`` show them, and a wrong
argument raises ``TypeError`` naming the method called, before any request."""

from __future__ import annotations

import inspect

import pytest

from xor_ack_dynamodb import MemoryAck

METHODS = {
    "create": ["tag", "value", "op_id", "owner", "replace_expired"],
    "stamp": ["tag", "value", "finished", "started", "op_id", "owner", "after"],
    "fail": ["tag", "reason", "owner"],
    "touch": None,
    "status": ["tag"],
    "delete": ["tag"],
    "create_many": None,
    "stamp_many": None,
    "touch_many": None,
    "status_many": None,
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_method_shows_its_parameters_and_names_itself_in_a_wrong_call(name: str) -> None:
    ack = MemoryAck()
    method = getattr(ack, name)
    shown = list(inspect.signature(method).parameters)
    assert shown[0] in ("tag", "tags", "chains", "stamps") and "args" not in shown, shown
    if METHODS[name] is not None:
        assert shown == METHODS[name]
    assert method.__doc__ and len(method.__doc__) > 80  # the builder's, not empty
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'nope'"):
        method("t", nope=1)
    assert not ack.stats.requests


def test_a_missing_argument_names_the_method() -> None:
    with pytest.raises(TypeError, match=r"^stamp\(\) missing 1 required positional argument: 'tag'"):
        MemoryAck().stamp()  # type: ignore[call-arg]

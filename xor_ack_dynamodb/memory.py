"""MemoryAck: the same chains kept in memory, for one process and for tests.

It is the ``ack`` package (events on ack and fail) with Storm's RotatingMap expiry, and it
follows the same rules as :class:`~xor_ack_dynamodb.XorAckDynamoDB`: the same methods,
errors, op-id idempotency and tombstones, so pipeline logic tested against it behaves the
same against DynamoDB.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .errors import (
    BufferLengthsUnequal,
    InvalidConfig,
    TagAcked,
    TagExists,
    TagExpired,
    TagFailed,
    TagNotFound,
    ZeroBufferNoOp,
)
from .model import ChainStatus, State, create_op_key, op_key, random_op_key
from .stamps import Stamp, as_bytes, check_tag, check_tags, xor_all

__all__ = ["MemoryAck"]

AckedCallback = Callable[[str], None]
FailedCallback = Callable[[str, str | None], None]


@dataclass(slots=True)
class _Record:
    stamp: bytes
    state: State
    ops: tuple[str, ...]  # oldest first; a tuple is a third of a deque's size
    bucket: dict[str, _Record]
    reason: str | None = None
    version: int = 1

    def status(self, tag: str) -> ChainStatus:
        return ChainStatus(tag, self.state, Stamp(self.stamp), None, self.reason, self.version)


class MemoryAck:
    """Ack chains in a dict, with Storm's rotating expiry. Thread-safe.

    :param buckets: how many ``rotate()`` calls a chain survives without being created or
        touched (Storm's RotatingMap buckets). A chain still pending when it falls off
        the oldest bucket becomes ``expired`` and ``on_failed(tag, "timeout")`` is
        called. Finished chains (acked, failed, expired) stay as tombstones for one more
        full cycle, then are forgotten, so memory is bounded by what rotation keeps.
    :param on_acked: called with the tag when a chain reaches zero.
    :param on_failed: called with the tag and the reason when a chain fails or times out.
    :param max_ops: op ids remembered per chain, as in ``XorAckDynamoDB``.

    Stamping does not reset a chain's expiry; ``touch()`` does (as in ``XorAckDynamoDB``).
    Callbacks run on the calling thread after the tracker's lock is released, so they
    may call the tracker. ``ChainStatus.expires_at`` is always None: expiry here is
    counted in rotations, not in seconds.
    """

    def __init__(
        self,
        *,
        buckets: int = 3,
        on_acked: AckedCallback | None = None,
        on_failed: FailedCallback | None = None,
        max_ops: int = 32,
    ) -> None:
        if not isinstance(buckets, int) or buckets < 2:
            raise InvalidConfig(f"buckets must be an int of at least 2, got {buckets!r}")
        if not isinstance(max_ops, int) or max_ops < 1:
            raise InvalidConfig(f"max_ops must be a positive int, got {max_ops!r}")
        self.on_acked = on_acked
        self.on_failed = on_failed
        self.max_ops = max_ops
        self._lock = threading.Lock()
        self._buckets: deque[dict[str, _Record]] = deque({} for _ in range(buckets))
        self._chains: dict[str, _Record] = {}

    def __len__(self) -> int:
        """How many chains (tombstones included) the tracker holds."""
        with self._lock:
            return len(self._chains)

    def _nursery(self, tag: str, record: _Record) -> None:
        record.bucket.pop(tag, None)
        record.bucket = self._buckets[0]
        record.bucket[tag] = record

    def create(self, tag: str, stamp: bytes | bytearray | memoryview, *, op_id: str | None = None) -> Stamp:
        """Start a chain; see :meth:`XorAckDynamoDB.create`. An expired chain is
        overwritten; a create delivered again with the same ``op_id`` returns the
        current value. Raises :class:`TagExists`, :class:`ZeroBufferNoOp`."""
        tag = check_tag(tag)
        data = as_bytes(stamp, tag=tag)
        if not any(data):
            raise ZeroBufferNoOp("cannot create a chain with an all-zero stamp", tag=tag)
        op = create_op_key(op_id) if op_id is not None else random_op_key()
        with self._lock:
            current = self._chains.get(tag)
            if current is not None:
                if op in current.ops:
                    return Stamp(current.stamp)
                if current.state != "expired":
                    raise TagExists(f"chain {tag!r} already exists ({current.state})", tag=tag)
                current.bucket.pop(tag, None)
            version = current.version + 1 if current is not None else 1
            record = _Record(data, "pending", (op,), self._buckets[0], version=version)
            self._buckets[0][tag] = record
            self._chains[tag] = record
            return Stamp(data)

    def stamp(self, tag: str, stamp: bytes | bytearray | memoryview, *, op_id: str | None = None) -> Stamp:
        """XOR ``stamp`` into the chain; see :meth:`XorAckDynamoDB.stamp`. Calls
        ``on_acked(tag)`` when it reaches zero. Raises :class:`TagNotFound`,
        :class:`TagAcked`, :class:`TagFailed`, :class:`TagExpired`,
        :class:`BufferLengthsUnequal`, :class:`ZeroBufferNoOp`."""
        tag = check_tag(tag)
        delta = as_bytes(stamp, tag=tag)
        if not any(delta):
            raise ZeroBufferNoOp("stamping with an all-zero stamp changes nothing", tag=tag)
        op = op_key(op_id) if op_id is not None else random_op_key()
        with self._lock:
            record = self._get(tag)
            if op in record.ops:
                return Stamp(record.stamp)
            self._check_pending(tag, record)
            if len(delta) != len(record.stamp):
                raise BufferLengthsUnequal(
                    f"stamp is {len(delta)} bytes but chain {tag!r} holds {len(record.stamp)}", tag=tag
                )
            new = xor_all((record.stamp, delta))
            record.stamp = bytes(new)
            record.ops = (record.ops + (op,))[-self.max_ops :]
            record.version += 1
            if new.acked:
                record.state = "acked"
                self._nursery(tag, record)  # the tombstone's retention starts now
        if new.acked and self.on_acked is not None:
            self.on_acked(tag)
        return new

    def fail(self, tag: str, reason: str | None = None) -> ChainStatus:
        """Mark a pending or expired chain failed and call ``on_failed(tag, reason)``
        (not again for a chain that already failed or timed out). Failing a failed chain
        changes nothing. Raises :class:`TagNotFound`, :class:`TagAcked`."""
        tag = check_tag(tag)
        with self._lock:
            record = self._get(tag)
            if record.state == "acked":
                raise TagAcked(f"chain {tag!r} is already acked", tag=tag)
            notify = record.state == "pending"
            if record.state != "failed":
                record.state = "failed"
                record.reason = reason
                record.version += 1
                self._nursery(tag, record)
            status = record.status(tag)
        if notify and self.on_failed is not None:
            self.on_failed(tag, reason)
        return status

    def touch(self, tag: str) -> ChainStatus:
        """Restart a pending chain's expiry: it again survives ``buckets`` rotations.
        Raises :class:`TagNotFound`, :class:`TagAcked`, :class:`TagFailed`,
        :class:`TagExpired`."""
        tag = check_tag(tag)
        with self._lock:
            record = self._get(tag)
            self._check_pending(tag, record)
            record.version += 1
            self._nursery(tag, record)
            return record.status(tag)

    def status(self, tag: str) -> ChainStatus:
        """The chain's status. Raises :class:`TagNotFound`."""
        tag = check_tag(tag)
        with self._lock:
            return self._get(tag).status(tag)

    def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        """The status of every known chain among ``tags``; unknown tags are absent."""
        wanted = check_tags(tags)
        with self._lock:
            return {t: self._chains[t].status(t) for t in wanted if t in self._chains}

    def delete(self, tag: str) -> None:
        """Forget the chain, whatever its state. Raises :class:`TagNotFound`."""
        tag = check_tag(tag)
        with self._lock:
            record = self._get(tag)
            record.bucket.pop(tag, None)
            del self._chains[tag]

    def rotate(self) -> list[str]:
        """Advance expiry by one bucket (Storm's RotatingMap). Chains still pending in
        the oldest bucket become ``expired``, and ``on_failed(tag, "timeout")`` is called
        for each; tombstones in it are forgotten. Returns the tags that timed out."""
        with self._lock:
            oldest = self._buckets.pop()
            self._buckets.appendleft({})
            timed_out = []
            for tag, record in oldest.items():
                if record.state == "pending":
                    record.state = "expired"
                    record.reason = "timeout"
                    record.bucket = self._buckets[0]
                    record.bucket[tag] = record
                    timed_out.append(tag)
                else:
                    del self._chains[tag]
        if self.on_failed is not None:
            for tag in timed_out:
                self.on_failed(tag, "timeout")
        return timed_out

    def _get(self, tag: str) -> _Record:
        record = self._chains.get(tag)
        if record is None:
            raise TagNotFound(f"chain {tag!r} does not exist", tag=tag)
        return record

    @staticmethod
    def _check_pending(tag: str, record: _Record) -> None:
        if record.state == "acked":
            raise TagAcked(f"chain {tag!r} is already acked", tag=tag)
        if record.state == "failed":
            raise TagFailed(f"chain {tag!r} has failed", tag=tag, reason=record.reason)
        if record.state == "expired":
            raise TagExpired(f"chain {tag!r} expired before it was acked", tag=tag)

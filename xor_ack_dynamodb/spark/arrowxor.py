"""Per-chain XORs of Arrow batches, vectorized (numpy), and the tracking columns.

Every row of a :class:`~xor_ack_dynamodb.spark.frame.TrackedFrame` carries five hidden
columns beside the user's:

``_xa_tag`` (string)
    the tag of the chain the row belongs to;
``_xa_edge`` (bigint)
    the row's edge, a 64-bit word (signed in Spark, the same bits as the unsigned edge);
``_xa_ghost`` (boolean)
    true for a row that carries an edge but no data: a record a filter dropped, a
    parent whose explode had no children, a record that failed, a split's balance. Ghost
    rows reach the sink and are acked with the data, but are never written;
``_xa_err`` (string, nullable)
    why the row's chain must fail (the chain is failed, not stamped);
``_xa_note`` (string, nullable)
    something to report about the root without failing it (bad bytes replaced).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["TAG", "EDGE", "GHOST", "ERR", "NOTE", "TRACKING", "ChainSums", "to_signed", "to_unsigned"]

TAG = "_xa_tag"
EDGE = "_xa_edge"
GHOST = "_xa_ghost"
ERR = "_xa_err"
NOTE = "_xa_note"
TRACKING = (TAG, EDGE, GHOST, ERR, NOTE)
TRACKING_DDL = f"{TAG} string, {EDGE} bigint, {GHOST} boolean, {ERR} string, {NOTE} string"

_SIGN = 1 << 63
_WORD = 1 << 64


def to_signed(edge: int) -> int:
    """A 64-bit edge as Spark's signed bigint."""
    return edge - _WORD if edge >= _SIGN else edge


def to_unsigned(value: int) -> int:
    """A Spark bigint as the unsigned 64-bit edge it stands for."""
    return value + _WORD if value < 0 else value


@dataclass
class ChainSums:
    """Per chain: the XOR of the edges seen, the first failure reason and note; rows of
    data (non-ghost) seen. Merging two is commutative (XOR, first-wins by sorted order
    for reasons)."""

    xors: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    rows: int = 0

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Fold one batch with the tracking columns in (numpy, no Python per row)."""
        import numpy as np
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return
        encoded = pc.dictionary_encode(batch.column(TAG))
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        edges = batch.column(EDGE).fill_null(0).to_numpy(zero_copy_only=False)
        edges = edges.astype(np.int64).view(np.uint64)
        sums = np.zeros(len(encoded.dictionary), dtype=np.uint64)
        np.bitwise_xor.at(sums, indices, edges)
        xors = self.xors
        for tag, value in zip(encoded.dictionary.to_pylist(), sums.tolist(), strict=True):
            xors[tag] = xors.get(tag, 0) ^ value
        ghosts = pc.sum(batch.column(GHOST).fill_null(False).cast("int64")).as_py() or 0
        self.rows += batch.num_rows - ghosts
        for column, into in ((ERR, self.errors), (NOTE, self.notes)):
            values = batch.column(column)
            if values.null_count == len(values):
                continue
            present = pc.is_valid(values)
            tags = pc.filter(batch.column(TAG), present).to_pylist()
            for tag, text in zip(tags, pc.filter(values, present).to_pylist(), strict=True):
                if tag not in into or text < into[tag]:
                    into[tag] = text

    def merge(self, other: ChainSums) -> None:
        for tag, value in other.xors.items():
            self.xors[tag] = self.xors.get(tag, 0) ^ value
        for mine, theirs in ((self.errors, other.errors), (self.notes, other.notes)):
            for tag, text in theirs.items():
                if tag not in mine or text < mine[tag]:
                    mine[tag] = text
        self.rows += other.rows

    def to_json(self) -> dict[str, object]:
        return {
            "xors": {tag: f"{value:016x}" for tag, value in sorted(self.xors.items())},
            "errors": dict(sorted(self.errors.items())),
            "notes": dict(sorted(self.notes.items())),
            "rows": self.rows,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ChainSums:
        xors = {tag: int(value, 16) for tag, value in dict(data["xors"]).items()}  # type: ignore[call-overload]
        return cls(xors, dict(data["errors"]), dict(data["notes"]), int(data["rows"]))  # type: ignore[call-overload]

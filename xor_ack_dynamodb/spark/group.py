r"""How the Spark layer stamps a chain of either mode.

The driver creates each root's chain holding its root edge ``r`` and, once the job that
holds the root's output committed, finishes it with one stamp. Only the group differs:

* ``xor`` chains: the stamp is ``r`` itself, sent as ``size`` big-endian bytes
  (``r ^ r == 0``).
* ``sum`` chains: the stamp is ``-r``, sent as an ``int`` that DynamoDB ``ADD``\s to the
  chain. Root edges are below ``2**64``, well within DynamoDB's 38-digit Numbers.

:func:`group_for` checks the mode and edge size before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidConfig

__all__ = ["Group", "group_for"]


@dataclass(frozen=True, slots=True)
class Group:
    """The group of one tracked run's chains (picklable; two fields)."""

    mode: Literal["xor", "sum"]
    size: int = 8

    @property
    def is_sum(self) -> bool:
        return self.mode == "sum"

    def value(self, amount: int) -> bytes | int:
        """What the tracker is sent for ``amount`` (a root edge, or the stamp that
        finishes one): ``size`` big-endian bytes for xor chains, the int itself for sum
        chains."""
        return amount if self.mode == "sum" else amount.to_bytes(self.size, "big")

    def finished(self, committed: int) -> int:
        """The stamp that finishes a chain created holding ``committed`` (its root
        edge): ``committed`` / ``-committed``."""
        return -committed if self.mode == "sum" else committed


def group_for(mode: object, edge_size: int) -> Group:
    """The group for a tracker of ``mode`` with ``edge_size``-byte edges. Sum chains
    take edges below ``2**64`` (the core's limit), so a sum-mode run needs
    ``edge_size=8``. Raises :class:`InvalidConfig`."""
    if mode not in ("xor", "sum"):
        raise InvalidConfig(f"mode must be 'xor' or 'sum', got {mode!r}")
    if mode == "sum" and edge_size != 8:
        raise InvalidConfig(f"sum-mode chains take 64-bit edges: edge_size must be 8, got {edge_size}")
    return Group(mode, edge_size)

"""How the Spark layer combines edges for a chain of either mode.

Inside a tracked RDD a record's *anchor* is what finishing the record takes off its
chain, and a ledger's *pending* value per chain is the stamp it will send: the edges its
records started, less the edges they finished. Only the group operations differ:

* ``xor`` chains: anchors and stamps are XORs of 64-bit edges (an ``int`` below
  ``2**(8*size)``), sent as ``size`` big-endian bytes. Starting and finishing are the
  same operation.
* ``sum`` chains: anchors are sums of edges (ints in ``[1, 2**64)``), a stamp adds the
  started edges and subtracts the finished ones, and is sent as a (possibly negative)
  ``int`` that DynamoDB ``ADD``\\s to the chain. Sums are exact Python ints; DynamoDB
  Numbers hold 38 digits, so a chain's value and every stamp stay exact while fewer
  than ``10**38 / 2**64``, about 5.4e18, edges are outstanding or carried by one stamp.

:func:`group_for` checks the mode and edge size before anything is written.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
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

    @property
    def merge(self) -> Callable[[int, int], int]:
        """Combine two anchors (or two pending stamps), and start an edge: ``^`` / ``+``."""
        return operator.add if self.mode == "sum" else operator.xor

    @property
    def finish(self) -> Callable[[int, int], int]:
        """Take a finished anchor off a pending stamp: ``^`` / ``-``."""
        return operator.sub if self.mode == "sum" else operator.xor

    def value(self, amount: int) -> bytes | int:
        """What the tracker is sent for ``amount`` (a root edge or a pending stamp):
        ``size`` big-endian bytes for xor chains, the int itself for sum chains."""
        return amount if self.mode == "sum" else amount.to_bytes(self.size, "big")

    def finished(self, committed: int) -> int:
        """The pending stamp that finishes ``committed`` (an anchor, or the committed XOR
        of a tracked DataFrame's rows): ``committed`` / ``-committed``."""
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

"""Where a message may be a copy: what its stamp checks, and how a parent that sends its
children again says so.

A first delivery (receive count 1, not flagged ``rs``, its envelope naming its parent)
stamps ``first=True, parent=, after=`` and is taken blindly unless the parent is marked
re-sent on the chain (``NOT contains(rs, :parent)``; in xor mode the read-modify-write
sees the list), then checked since ``after``. Anything else (a redelivery, a re-sent
copy, an S3-carried child, an envelope without ``parent``) is checked since its
parent's position, or the whole lineage when the envelope has none: no copy of a child
can land before its parent's stamp did. A parent whose stamp (or a start whose create)
came back a duplicate marks itself re-sent before sending again; the mark alone keeps
every copy exact (a copy names its parent, marked before the copy exists), the ``rs``
flag only spares a sum-mode copy the first write the mark would refuse.

See docs/lambda.md, "Exactly once, however late the copy" (the costs and the race
timelines).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ..stamps import Position
from .context import Child
from .envelope import Envelope

__all__ = ["stamp_options", "as_sent"]


def stamp_options(envelope: Envelope, receive_count: int, counted: bool = True) -> dict[str, Any]:
    """The ``after``/``first``/``parent`` of the stamp of a message carrying
    ``envelope``, received ``receive_count`` times (``counted`` False: its carrier does
    not count deliveries, as S3 events do not)."""
    if not counted or receive_count > 1 or envelope.resent or envelope.parent is None:
        return {"after": envelope.after}
    return {"first": True, "parent": envelope.parent, "after": envelope.after}


def as_sent(children: Iterable[Child], after: Position | None, resent: bool) -> list[Child]:
    """``children`` with their envelopes naming where their parent's op landed
    (``after``) and, when the parent sends them again, flagged re-sent."""
    return [replace(c, envelope=replace(c.envelope, after=after, resent=resent)) for c in children]

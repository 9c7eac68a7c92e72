"""Where a message may be a copy: what its stamp checks, and how a parent that sends its
children again says so.

The chain remembers every op for its whole life (its item's window, then history items
beside it), but reading that history costs requests. A stamp that says "no earlier copy
of me can exist" (``first=True``) pays nothing: one ``UpdateItem`` in sum mode. So the
serverless layer says it exactly where it is true, and otherwise bounds the search by the
position of the message's parent (no copy of a child can land before its parent's stamp
did):

* **a first delivery** (``ApproximateReceiveCount`` 1, not re-sent, its envelope naming
  its parent): ``first=True, parent=<the parent's op id>, after=<the parent's position>``.
  The chain takes it blindly, *unless* the parent is in the chain's re-sent list: then
  the write's condition (``NOT contains(rs, :parent)``; in xor mode the read-modify-write
  sees the list) fails and the stamp is checked since ``after``;
* **a redelivery** (``ApproximateReceiveCount`` > 1), **a re-sent child** (``rs`` in its
  envelope), **an S3-carried child** (S3 and Lambda's asynchronous retries give no
  receive count) and **an envelope of an older writer** (no ``parent``): ``after=<the
  parent's position>``, or the whole lineage when the envelope has none: checked against
  the window and, when history has moved past ``after``, the history blocks since.

A parent whose own stamp came back ``duplicate`` cannot know which of its children its
earlier attempt sent: it marks itself re-sent on the chain (``mark_resent``) *before*
sending them again, flagged ``rs``. A start whose create came back ``duplicate`` (a
redelivered S3 event, a retried ``start_id``) does the same under its create's op id.
The mark alone keeps every copy exact (a copy names its parent, which is marked before
it exists); the flag spares a sum-mode copy its first write, which the mark would refuse.

Why an older envelope (no ``parent``) is checked even on its first receive: the parent
that sent it ran a version that neither marked itself nor flagged what it re-sent, so a
copy it sent again arrives with a receive count of 1 and nothing to tell it from the
original. Only the messages in flight during an upgrade carry such an envelope; they pay
the whole-lineage check (free while the chain's item holds every op since its start,
one history read after). A missing ``after`` is read as the lineage's start, the most
that can be searched.

The race an original child loses to its re-sent twin (closed by the parent's mark)::

    P  (receive 1): stamp P applied at position p; crash before deleting the message
    P' (receive 2): stamp P: duplicate (found at p) ──> mark_resent(P) ──> send c' (rs)
    c' (rs):        checked since p: not found ──> applied at q
    ... more than a window of other ops: c's op moves from the item to history ...
    c  (P's original send, slow): first=True, parent=P
       ADD ... AND NOT contains(rs, P): refused (P is marked)
       checked since p: found in history at q ──> duplicate, applied once

Without the mark, ``c`` would be a blind first delivery whose op left the window long
ago: applied twice. Had ``c`` landed before the mark, ``c'`` (flagged ``rs``) is the
one checked and finds ``c``.

A child redelivered by SQS::

    c  (receive 1): stamp applied at q; the function times out before deleting
    ... 500 other stamps on the chain ...
    c  (receive 2): after=p (its parent's position) ──> history since p read: q found
       ──> duplicate; its children sent again as above
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

"""The I/O the calls ask of a store, and what a store answers.

A call (:mod:`.calls`) yields one of these requests; the driver hands it to the store and
sends back a :class:`Written` or :class:`Rejected` (or a chain, for :class:`Read`), or
throws the store's exception into the call. Every conditional request is atomic in the
store, as DynamoDB makes one item's; the conditions of :class:`Add`, :class:`Extend`,
:class:`MarkFailed` and a dated :class:`Put` are the ``ChainRules`` predicates
``add_allowed``, ``touch_allowed``, ``fail_allowed`` and ``before_deadline``, and a store
must implement exactly those. Every deadline test uses the clock as the request is sent
(:func:`dated`), never the reading its round began with.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..stamps import Position
from .algebra import Value
from .chain import Chain, Op
from .history import Block


@dataclass(frozen=True, slots=True)
class Read:
    """A strongly consistent read. Answered with the :class:`Chain`, or None."""

    tag: str


@dataclass(frozen=True, slots=True)
class Put:
    """Write ``new`` whole, only if the stored chain is still ``expect`` (its write
    token; for a foreign item, its value and version), or, with ``expect`` None, only if
    there is no chain. With ``now`` (a stamp's write), also only if the stored chain's
    deadline has not passed at ``now`` (``ChainRules.before_deadline``); None: no
    deadline test (a create's, a completion's). Answered with ``Written(new)`` or
    ``Rejected``."""

    new: Chain
    expect: Chain | None
    now: int | None = None


@dataclass(frozen=True, slots=True)
class Remove:
    """Delete the chain only if it is still ``expect``."""

    expect: Chain


@dataclass(frozen=True, slots=True)
class RemoveAny:
    """Delete the chain whatever it holds. Answered with ``Written(the old chain or
    None)``."""

    tag: str


@dataclass(frozen=True, slots=True)
class Add:
    """Sum mode's stamp: ``ADD`` ``delta`` to the sum and append ``op``, if
    ``ChainRules.add_allowed``. Answered with ``Written(the chain after)``.

    ``NOT contains(ops, :op)`` only sees the window: a write whose op may have an
    earlier copy carries ``after``, the position after which that copy can have landed
    and up to which the op is known absent, and then lands only if no op after it has
    left the window, on its lineage (``ChainRules.covers``). None: no earlier copy
    exists (an op id the library drew, first sent)."""

    tag: str
    delta: Value
    op: Op
    owner: str | None
    now: int
    after: Position | None = None


@dataclass(frozen=True, slots=True)
class Extend:
    """``touch()``: move the deadline to ``now + ttl`` if ``ChainRules.touch_allowed``
    (``ttl`` None keeps it: a chain without a clock deadline)."""

    tag: str
    ttl: int | None
    owner: str | None
    now: int


@dataclass(frozen=True, slots=True)
class MarkFailed:
    """``fail()``: store ``failed`` (and ``reason``) if ``ChainRules.fail_allowed``."""

    tag: str
    reason: str | None
    owner: str | None
    now: int


@dataclass(frozen=True, slots=True)
class Trim:
    """Remove the ``count`` oldest ops (positions ``cut + 1`` to ``cut + count``, whose
    history block is already written) if the chain still starts its list there, on
    ``lineage``, and keeps ``window`` ops after them (``ChainRules.trim_allowed``).
    Answered with ``Written(None)``."""

    tag: str
    count: int
    window: int
    now: int = 0
    cut: int = 0
    lineage: bytes = b""


@dataclass(frozen=True, slots=True)
class WriteHistory:
    """Store ``blocks`` of lineage ``lineage``'s history (idempotent: a block's content
    never changes), kept until ``purge_at``. Answered with ``Written(None)``."""

    tag: str
    lineage: bytes
    blocks: tuple[Block, ...]
    purge_at: int | None = None


@dataclass(frozen=True, slots=True)
class ReadHistory:
    """Read blocks ``indexes`` of lineage ``lineage``'s history (strongly consistent).
    Answered with :class:`HistoryRead`."""

    tag: str
    lineage: bytes
    indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class HistoryRead:
    """The blocks found (index -> ops); ``unprocessed``: indexes to ask again."""

    blocks: dict[int, tuple[Op, ...]]
    unprocessed: tuple[int, ...] = ()


Request = Read | Put | Remove | RemoveAny | Add | Extend | MarkFailed | Trim | WriteHistory | ReadHistory


def tag_of(request: Request) -> str:
    """The tag a request is about."""
    if isinstance(request, Put):
        return request.new.tag
    if isinstance(request, Remove):
        return request.expect.tag
    return request.tag


@dataclass(frozen=True, slots=True)
class Written:
    """The request was applied; ``chain`` is the chain after it (None after a delete;
    for :class:`RemoveAny`, the chain it deleted, or None if there was none).
    ``resent`` is True when the transport sent the request more than once (botocore's
    own retries), so an earlier copy may be the one that was applied. ``later`` is True
    when ``chain`` was read after the write rather than returned by it (an update in a
    transaction): writes that landed after this one may show in it."""

    chain: Chain | None
    resent: bool = False
    later: bool = False


@dataclass(frozen=True, slots=True)
class Rejected:
    """The condition failed; ``current`` is the chain as the store holds it now (None if
    there is none). ``resent`` as for :class:`Written`: an earlier copy of the same
    request may have been applied, and be why this one was rejected. ``at``: the clock
    reading the request's deadline test was sent with, when the driver dated it
    (:func:`dated`) later than the call's round began: the call judges the rejection at
    that time (:func:`judged_at`)."""

    current: Chain | None
    resent: bool = False
    at: int | None = None


Reply = Written | Rejected

#: The requests whose condition tests the chain's deadline against the writer's clock
#: (a :class:`Put` only with its ``now``), and :class:`MarkFailed`, whose ``now`` dates
#: the tombstone: the driver dates them as they are sent (:func:`dated`).
DATED = (Put, Add, Extend, MarkFailed)


def dated(request: Request, now: int) -> Request:
    """``request`` as sent at the clock reading ``now``: the ``now`` of a request in
    :data:`DATED` (a :class:`Put` only when it has one) becomes ``now``, never earlier
    than the one the call gave it (a clock stepped back does not weaken a test the call
    already passed). The driver calls this just before it hands the request to the
    store, so that a deadline test is made with the writer's clock as the request goes
    out, not as its round began (a round may wait seconds on reads first). Every other
    request is returned as it is."""
    if isinstance(request, Put):
        if request.now is None or request.now >= now:
            return request
        return replace(request, now=now)
    if isinstance(request, (Add, Extend, MarkFailed)) and request.now < now:
        return replace(request, now=now)
    return request


def judged_at(reply: Rejected, now: int) -> int:
    """The time to judge a rejection at: the clock reading its request was sent with
    (``reply.at``) when later than the call's ``now``."""
    return reply.at if reply.at is not None and reply.at > now else now


#: The requests a store can apply together, all or none (DynamoDB's TransactWriteItems).
TRANSACTABLE = (Put, Remove, Add, Extend, MarkFailed)


@dataclass(frozen=True, slots=True)
class Committed:
    """A transaction of requests (``ChainStore.transact``) was applied as a whole;
    ``replies`` are in the requests' order. A ``Written`` of an update (``Add``,
    ``Extend``, ``MarkFailed``) carries no chain: DynamoDB returns none from a
    transaction."""

    replies: list[Written]


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A transaction was applied not at all. ``rejected`` maps the positions of the
    requests whose condition failed to their rejection (with the chain as it stands);
    every other request may simply be sent again."""

    rejected: dict[int, Rejected]


class TransactionsUnsupported(Exception):
    """The store cannot apply requests together (dynalite has no TransactWriteItems):
    send them one by one."""


@dataclass
class BatchRead:
    """What one batch read returned: the chains found, the items that could not be
    decoded (tag -> why), and the tags the store did not get to (to ask again)."""

    chains: list[Chain] = field(default_factory=list)
    corrupt: dict[str, str] = field(default_factory=dict)
    unprocessed: list[str] = field(default_factory=list)

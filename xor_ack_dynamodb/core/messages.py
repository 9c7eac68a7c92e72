"""The requests the calls ask of a store, and its replies. Every conditional request is
atomic in the store; its condition is the ``ChainRules`` predicate its docstring names,
and a store must implement exactly that. Every deadline test uses the clock as the
request is sent (:func:`dated`).
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
    """Write ``new`` whole, only if the stored chain is still ``expect`` (its token;
    for a foreign item, its value and version; None: no chain), and with ``now`` (a
    stamp's write) ``ChainRules.before_deadline``."""

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
    ``ChainRules.add_allowed``, guarded by ``after`` (``ChainRules.covers``; None: no
    earlier copy exists). Answered with ``Written(the chain after)``."""

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
    """Remove the ``count`` oldest ops (positions ``cut + 1`` on) if
    ``ChainRules.trim_allowed``. Answered with ``Written(None)``."""

    tag: str
    count: int
    window: int
    now: int = 0
    cut: int = 0
    lineage: bytes = b""


@dataclass(frozen=True, slots=True)
class WriteHistory:
    """Store ``blocks`` of lineage ``lineage``'s history (idempotent), kept until
    ``purge_at``. Answered with ``Written(None)``."""

    tag: str
    lineage: bytes
    blocks: tuple[Block, ...]
    purge_at: int | None = None


@dataclass(frozen=True, slots=True)
class ReadHistory:
    """Read blocks ``indexes`` of lineage ``lineage``'s history (strongly consistent)."""

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
    for :class:`RemoveAny`, the chain it deleted). ``resent``: the transport sent it more
    than once, so an earlier copy may be the one applied. ``later``: ``chain`` was read
    after the write (an update in a transaction), so later writes may show in it."""

    chain: Chain | None
    resent: bool = False
    later: bool = False


@dataclass(frozen=True, slots=True)
class Rejected:
    """The condition failed; ``current`` is the chain as the store holds it now.
    ``resent`` as for :class:`Written`. ``at``: the clock reading the driver dated the
    request with (:func:`dated`), when later than the round's (:func:`judged_at`)."""

    current: Chain | None
    resent: bool = False
    at: int | None = None


Reply = Written | Rejected

#: The requests the driver dates as they are sent (:func:`dated`).
DATED = (Put, Add, Extend, MarkFailed)


def dated(request: Request, now: int) -> Request:
    """``request`` as sent at the clock reading ``now`` (called by the driver just
    before it hands the request to the store): the ``now`` of a request in
    :data:`DATED` becomes ``now``, never earlier than the call's own."""
    if isinstance(request, DATED) and request.now is not None and request.now < now:
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
    """A transaction was applied as a whole; ``replies`` in the requests' order (an
    update's carries no chain: DynamoDB returns none from a transaction)."""

    replies: list[Written]


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A transaction was applied not at all. ``rejected``: the positions of the
    requests whose condition failed; every other may simply be sent again."""

    rejected: dict[int, Rejected]


class TransactionsUnsupported(Exception):
    """The store cannot apply requests together (dynalite has no TransactWriteItems):
    send them one by one."""


@dataclass
class BatchRead:
    """One batch read: the chains found, undecodable items (tag -> why), and the tags
    the store did not get to."""

    chains: list[Chain] = field(default_factory=list)
    corrupt: dict[str, str] = field(default_factory=dict)
    unprocessed: list[str] = field(default_factory=list)

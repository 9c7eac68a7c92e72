"""The drivers: the loops that send a call's requests to a store, wait and retry.

* :class:`Driver` / :class:`AsyncDriver`: run the sans-IO calls of
  :mod:`xor_ack_dynamodb.core` on a store, one at a time or many in lockstep, within a
  :class:`~xor_ack_dynamodb.RetryPolicy`.
* :class:`SyncTracker` / :class:`AsyncTracker`: the methods every tracker shares.
* :class:`ChainStore` / :class:`AsyncChainStore`: the primitives a store implements.
* :class:`AckTracker` / :class:`AsyncAckTracker`: the protocols every tracker satisfies.

For whoever writes a store or a tracker (docs/architecture.md, "Where a new piece
goes"; how ``_async/``, the ``_sync/`` generated from it and ``base.py`` share the work:
"Rules", "Drivers are written once").
"""

from ._async.driver import AsyncChainStore, AsyncDriver
from ._async.protocol import AsyncAckTracker
from ._async.tracker import AsyncTracker
from ._sync.driver import ChainStore, Driver
from ._sync.protocol import AckTracker
from ._sync.tracker import SyncTracker

__all__ = [
    "AckTracker",
    "AsyncAckTracker",
    "AsyncChainStore",
    "AsyncDriver",
    "AsyncTracker",
    "ChainStore",
    "Driver",
    "SyncTracker",
]

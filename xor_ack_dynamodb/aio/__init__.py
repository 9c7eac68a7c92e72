"""The asyncio trackers, driven by the same chain rules as every other tracker
(``pip install 'xor-ack-dynamodb[async]'``).

* :class:`AsyncXorAckDynamoDB`: ``XorAckDynamoDB``'s constructor and methods, awaited
  (the batch calls ``create_many``, ``stamp_many``, ``touch_many`` included).
* :class:`AsyncMemoryAck`: ``MemoryAck``, awaited (no AWS, for tests).
* :class:`AsyncAckTracker`: the protocol both satisfy.
* :func:`async_dynamodb_client`: an aiobotocore client built as the library builds its
  boto3 clients (region, endpoint, timeouts from the retry budget).

A facade: the code lives with its twin (the drivers in :mod:`xor_ack_dynamodb.drivers`,
the trackers in :mod:`xor_ack_dynamodb.stores`). There is no asyncio
``CombiningTracker``: in sum mode each stamp is one request whatever the concurrency,
which is what combining buys in xor mode.
"""

from ..drivers import AsyncAckTracker, AsyncChainStore, AsyncDriver, AsyncEngine, AsyncTracker
from ..stores.dynamodb.clients import ClientSettings, async_dynamodb_client, client_settings, open_client
from ..stores.dynamodb.tracker import AsyncXorAckDynamoDB
from ..stores.memory import AsyncMemoryAck

__all__ = [
    "AsyncAckTracker",
    "AsyncChainStore",
    "AsyncDriver",
    "AsyncEngine",
    "AsyncMemoryAck",
    "AsyncTracker",
    "AsyncXorAckDynamoDB",
    "ClientSettings",
    "async_dynamodb_client",
    "client_settings",
    "open_client",
]

"""The asyncio trackers, driven by the same chain rules as every other tracker
(``pip install 'xor-ack-dynamodb[async]'``).

* :class:`AsyncXorAckDynamoDB`: ``XorAckDynamoDB``'s constructor and methods, awaited
  (the batch calls ``create_many``, ``stamp_many``, ``touch_many`` included).
* :class:`AsyncMemoryAck`: ``MemoryAck``, awaited (no AWS, for tests).
* :class:`AsyncAckTracker`: the protocol both satisfy.
* :func:`async_dynamodb_client`: an aiobotocore client built as the library builds its
  boto3 clients (region, endpoint, timeouts from the retry budget).

A facade of what asyncio code calls: the code lives with its twin. The driver and the
base of the trackers (``AsyncDriver``, ``AsyncChainStore``, ``AsyncTracker``) are
exported by :mod:`xor_ack_dynamodb.drivers`; the client helpers (``open_client``,
``client_settings``) stay in :mod:`xor_ack_dynamodb.stores.dynamodb.clients`. There is
no asyncio ``CombiningTracker``: in sum mode each stamp is one request whatever the
concurrency, which is what combining buys in xor mode.
"""

from ..drivers import AsyncAckTracker
from ..stores.dynamodb.clients import async_dynamodb_client
from ..stores.dynamodb.tracker import AsyncXorAckDynamoDB
from ..stores.memory import AsyncMemoryAck

__all__ = [
    "AsyncAckTracker",
    "AsyncMemoryAck",
    "AsyncXorAckDynamoDB",
    "async_dynamodb_client",
]

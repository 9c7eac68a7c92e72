"""The asyncio tracker: ``AsyncXorAckDynamoDB`` on aiobotocore, driven by the same chain
rules as every other tracker (``pip install 'xor-ack-dynamodb[async]'``).

* :class:`AsyncXorAckDynamoDB`: ``XorAckDynamoDB``'s constructor and methods, awaited.
* :class:`AsyncMemoryAck`: ``MemoryAck``, awaited (no AWS, for tests).
* :class:`AsyncAckTracker`: the protocol both satisfy.
* :func:`async_dynamodb_client`: an aiobotocore client built as the library builds its
  boto3 clients (region, endpoint, timeouts from the retry budget).

There is no asyncio ``CombiningTracker``: in sum mode each stamp is one request whatever
the concurrency, which is what combining buys in xor mode.
"""

from .clients import ClientSettings, async_dynamodb_client, client_settings
from .dynamodb import AsyncXorAckDynamoDB
from .engine import AsyncChainStore, AsyncEngine
from .memory import AsyncMemoryAck
from .protocol import AsyncAckTracker
from .tracker import AsyncTracker

__all__ = [
    "AsyncAckTracker",
    "AsyncChainStore",
    "AsyncEngine",
    "AsyncMemoryAck",
    "AsyncTracker",
    "AsyncXorAckDynamoDB",
    "ClientSettings",
    "async_dynamodb_client",
    "client_settings",
]

"""The one interface every tracker implements.

``XorAckDynamoDB``, ``MemoryAck`` and ``CombiningTracker`` satisfy :class:`AckTracker`
with identical signatures (mypy checks it for the class they share), so pipeline code can
take any of them. The protocol is generated with its asyncio twin
(:mod:`xor_ack_dynamodb.drivers`); this module is where callers find it.
"""

from .drivers import AckTracker

__all__ = ["AckTracker"]

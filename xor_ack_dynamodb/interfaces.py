"""The one interface every tracker implements.

``XorAckDynamoDB``, ``MemoryAck`` and ``CombiningTracker`` satisfy :class:`AckTracker`, so
pipeline code can take any of them. Its signatures are the trackers' shared base class's
(:class:`~xor_ack_dynamodb.drivers.SyncTracker`), each written once (in
:mod:`xor_ack_dynamodb.drivers.base`) and taken by the protocol as they are, so the two
cannot differ. The protocol is generated with its
asyncio twin (:mod:`xor_ack_dynamodb.drivers`); this module is where callers find it.
"""

from .drivers import AckTracker

__all__ = ["AckTracker"]

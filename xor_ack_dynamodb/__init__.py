"""Guaranteed message processing with XOR ack chains kept in Amazon DynamoDB.

A root message starts a chain holding a random stamp; whoever finishes a piece of work
XORs in, with one stamp, the edge it finished and the edges of the children it started.
The chain reads all zeros exactly when every started edge has finished.
"""

from . import errors
from .combiner import CombiningTracker
from .config import AckConfig
from .core.factory import StampSpec
from .interfaces import AckTracker
from .retry import RetryPolicy
from .stamps import Stamp, Sum, derive_edge, new_stamp, xor
from .stats import RequestStats
from .status import ChainStatus, State
from .stores.dynamodb.tracker import XorAckDynamoDB
from .stores.memory import MemoryAck
from .testing import DynamoDBLocal, LocalDynamoDB, MotoServer

__all__ = [
    "AckConfig",
    "AckTracker",
    "ChainStatus",
    "CombiningTracker",
    "DynamoDBLocal",
    "LocalDynamoDB",
    "MemoryAck",
    "MotoServer",
    "RequestStats",
    "RetryPolicy",
    "Stamp",
    "StampSpec",
    "State",
    "Sum",
    "XorAckDynamoDB",
    "derive_edge",
    "errors",
    "new_stamp",
    "xor",
]

__version__ = "0.2.0"

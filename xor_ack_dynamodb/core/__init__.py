"""The storage-neutral core: the chain rules and the sans-IO calls that apply them.

* :mod:`.algebra`: xor and sum, the two groups a chain can count in.
* :mod:`.chain`: :class:`Chain`, a chain's immutable value, and op keys.
* :mod:`.rules`: :class:`ChainRules`, every decision (pure functions of a chain and now).
* :mod:`.messages`: the requests a call makes of a store, and the replies.
* :mod:`.calls`: create/stamp/fail/touch/status/delete as sans-IO state machines.
* :mod:`.factory`: argument checking, shared by every tracker.
* :mod:`.batch`: many calls stepped together (the planning half of ``run_many``).

Nothing here sleeps, reads the clock or talks to the network: the caller passes "now".
A store implements only primitives; a driver (:mod:`xor_ack_dynamodb.drivers`) moves
requests and replies and waits. The rules exist once.
"""

from .algebra import Mode, SumAlgebra, XorAlgebra, algebra_for
from .calls import (
    AddCall,
    Again,
    CreateCall,
    DeleteCall,
    FailCall,
    StampCall,
    StatusCall,
    TouchCall,
    Transient,
)
from .chain import Chain, Op
from .factory import CallFactory
from .messages import BatchRead
from .rules import ChainRules, Plan

__all__ = [
    "AddCall",
    "Again",
    "BatchRead",
    "CallFactory",
    "Chain",
    "ChainRules",
    "CreateCall",
    "DeleteCall",
    "FailCall",
    "Mode",
    "Op",
    "Plan",
    "StampCall",
    "StatusCall",
    "SumAlgebra",
    "TouchCall",
    "Transient",
    "XorAlgebra",
    "algebra_for",
]

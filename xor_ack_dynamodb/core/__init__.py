"""The storage-neutral core: the chain rules and the sans-IO calls that apply them.

* :mod:`.algebra`: xor and sum, the two groups a chain can count in.
* :mod:`.chain`: :class:`~.chain.Chain`, a chain's immutable value, and op keys.
* :mod:`.rules`: :class:`~.rules.ChainRules`, every decision (pure functions of a chain
  and now).
* :mod:`.messages`: the requests a call makes of a store, and the replies.
* :mod:`.calls`: create/stamp/fail/touch/status/delete as sans-IO state machines, and
  :class:`~.calls.Step`, which a driver steps them with.
* :mod:`.batch`: many calls stepped together (the planning half of ``run_many``).
* :mod:`.factory`: argument checking, shared by every tracker.

Nothing here sleeps, reads the clock or talks to the network: the caller passes "now".
A store implements only primitives; a driver (:mod:`xor_ack_dynamodb.drivers`) moves
requests and replies and waits. The rules exist once. Import from the modules.
"""

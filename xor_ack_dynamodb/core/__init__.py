"""The storage-neutral core: the chain rules (:mod:`.rules`, over the values of
:mod:`.chain` and :mod:`.algebra`) and the sans-IO calls that apply them (:mod:`.calls`,
:mod:`.stamping`, stepped together by :mod:`.batch`), built from checked arguments by
:mod:`.factory`. Nothing here sleeps, reads the clock or talks to the network: the caller
passes "now". A store implements only primitives (:mod:`.messages`); a driver
(:mod:`xor_ack_dynamodb.drivers`) moves requests and replies and waits.
"""

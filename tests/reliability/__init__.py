"""The reliability suite: fault injection, process kills, the hot chain, property tests,
bad input and security. ``scripts/reliability.py`` runs it at full size and prints its
figures; ``make test`` runs it at CI size."""

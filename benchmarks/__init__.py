"""The benchmark suite: ``make bench`` (or ``python -m benchmarks``).

Every comparison is measured in one run against one embedded backend, a moto server
(``LocalDynamoDB``) spoken to over HTTP, so the figures that matter are ratios and
requests per stamp, which travel between machines; absolute rates do not.
"""

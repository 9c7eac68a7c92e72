"""The storage-neutral core: chain values, rules and the sans-IO calls that apply them.
Nothing here sleeps, reads the clock or talks to the network (docs/architecture.md).
"""

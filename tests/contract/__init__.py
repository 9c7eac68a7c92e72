"""The contract suite: one set of tests every tracker passes on every backend and in both modes."""

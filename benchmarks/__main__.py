"""``python -m benchmarks``: run the suite, print the table, write the results."""

from .run import main

if __name__ == "__main__":
    raise SystemExit(main())

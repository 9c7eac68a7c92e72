# Everything runs from a virtualenv in .venv that the targets create themselves;
# a fresh machine needs only python3 (3.11+) and Java 17 (for Spark).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast reliability bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# The main job on the embedded default: a moto server in-process, Spark local[*].
demo: $(STAMP)
	$(VENV)/bin/xor-ack wordcount

# The whole test suite (what CI runs).
test: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf $(VENV) out build *.egg-info .pytest_cache

# Two commands for a fresh machine with Python 3.11+:
#   make serve   install the sidecar and its local model, then run it on 127.0.0.1:8377
#   make test    install the test tools, then run ruff, mypy and the whole test suite
# For development, `make check` is the fast loop: ruff, mypy and the tests not marked slow or e2e.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve test check install install-test lint typecheck pytest bench bench-quick reliability clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/openclaw-lossless model fetch

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/openclaw-lossless model fetch

serve: install
	$(BIN)/openclaw-lossless serve

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

# The whole suite on SQLite, then again with every sidecar on a real PostgreSQL + pgvector, the real-gateway
# end-to-end and browser tests included (tests/conftest.py: --store-backend; tests about SQLite's own file are
# marked sqlite_only and skipped there; tests/postgres/ already ran against the server in the first pass).
pytest:
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest --store-backend postgresql --ignore=tests/postgres

test: install-test lint typecheck pytest

# The fast developer loop: no fault/load tests, no real-gateway end-to-end run.
check: install-test lint typecheck
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -m "not slow and not e2e" -q

# The fault, load and hostile-input tests, writing the committed figures the README's Reliability section quotes.
RELIABILITY_TESTS := tests/test_crash.py tests/test_disk_full.py tests/test_embedding_faults.py tests/test_corrupt_db.py \
	tests/test_concurrency.py tests/test_fuzz_api.py tests/test_capture_properties.py
reliability: install-test
	LOSSLESS_RELIABILITY_RESULTS=$(abspath benchmarks/results/reliability.json) PATH="$(abspath $(BIN)):$$PATH" \
		$(BIN)/python -m pytest $(RELIABILITY_TESTS) -s

# The full benchmarks write benchmarks/results/ (minutes); the quick ones are CI's smoke test of them.
bench: install-test
	$(BIN)/python benchmarks/locomo.py
	$(BIN)/python benchmarks/scale.py --messages 10000,100000,1000000

LOCOMO ?= $(firstword $(wildcard ../shared/data/locomo/locomo_dev.json) benchmarks/fixtures/locomo-format-sample.json)

bench-quick: install-test
	$(BIN)/python benchmarks/locomo.py --quick --data $(LOCOMO) --out $$(mktemp -d)
	$(BIN)/python benchmarks/scale.py --quick --out $$(mktemp -d)
	$(BIN)/python benchmarks/scale.py --quick --backend postgres --out $$(mktemp -d)
	$(BIN)/python benchmarks/keyword_index_ab.py --quick --out $$(mktemp -d)
	$(BIN)/python benchmarks/redaction.py --quick --data $(LOCOMO) --out $$(mktemp -d)
	$(BIN)/python benchmarks/multilingual.py --quick --out $$(mktemp -d)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# Two commands for a fresh machine with Python 3.11+:
#   make serve   install the sidecar and its local model, then run it on 127.0.0.1:8377
#   make test    install the test tools, then run ruff, mypy, the strict docs build and the whole test suite
#   make docs    build the documentation site (docs/, mkdocs.yml) into site/
# For development, `make check` is the fast loop: ruff, mypy and the tests not marked slow or e2e.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# The stamps are files; every other target is a command.
.PHONY: serve test check commits container-test screenshots install install-test install-docs model lint typecheck \
	pytest docs docs-check bench bench-quick reliability clean

# Each step says what it does in one line. The venv is made once; the project is installed again only when
# pyproject.toml changes (a stamp in the venv); the model check is a no-op when the built model is in place.
INSTALLED := $(VENV)/.installed
INSTALLED_TEST := $(VENV)/.installed-test
PIP_INSTALL := PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet --disable-pip-version-check

$(BIN)/python:
	@echo "==> creating the virtual environment $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP_INSTALL) --upgrade pip

$(INSTALLED): pyproject.toml | $(BIN)/python
	@echo "==> installing openclaw-lossless and its dependencies (pyproject.toml is new or changed)"
	@$(PIP_INSTALL) -e .
	@touch $@

$(INSTALLED_TEST): pyproject.toml | $(BIN)/python
	@echo "==> installing openclaw-lossless with its test tools (pyproject.toml is new or changed)"
	@$(PIP_INSTALL) -e '.[test]'
	@touch $@ $(INSTALLED)

model: $(INSTALLED)
	@echo "==> checking the local embedding model (built once, then reused)"
	@$(BIN)/openclaw-lossless model fetch

install: $(INSTALLED) model

install-test: $(INSTALLED_TEST) model

serve: install
	@echo "==> starting the sidecar (Ctrl-C stops it)"
	@$(BIN)/openclaw-lossless serve

# Installed once, and again only when pyproject.toml changes.
$(VENV)/.docs-installed: pyproject.toml | $(BIN)/python
	@echo "==> installing the documentation tools (pyproject.toml is new or changed)"
	@$(PIP_INSTALL) -e '.[docs]'
	@touch $@

install-docs: $(VENV)/.docs-installed

# The site: the pages in docs/ plus the reference sections docs/hooks.py generates from the code. Strict:
# a broken link, a missing page or a setting, command or endpoint without a note fails the build.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict
docs: install-docs
	$(MKDOCS) --site-dir site

docs-check:
	out=$$(mktemp -d) && $(MKDOCS) --site-dir $$out; status=$$?; rm -rf $$out; exit $$status

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint Dockerfile

typecheck:
	$(BIN)/mypy

# The whole suite on SQLite, then again with every sidecar on a real PostgreSQL + pgvector, the real-gateway
# end-to-end and browser tests included (tests/conftest.py: --store-backend; tests about SQLite's own file are
# marked sqlite_only and skipped there; tests/postgres/ already ran against the server in the first pass).
pytest:
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest --store-backend postgresql --ignore=tests/postgres

test: install-test lint typecheck docs-check pytest

# The fast developer loop (a few minutes on 2 cores): SQLite only, no fault/load tests or heaviest modules
# (marked slow), no real-gateway end-to-end run, no browser, no PostgreSQL server. make test runs them all.
check: install-test lint typecheck commits
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -m "not slow and not e2e and not browser" \
		--ignore=tests/postgres -q

# The Dockerfile built and started with podman on a new volume (minutes: not part of `make test`).
container-test: install-test
	command -v podman >/dev/null || apt-get install -y podman runc debootstrap
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest tests/test_container.py --container -v

# The browser tests write their screenshots into the docs' folder instead of build/screenshots.
screenshots: install-test
	LOSSLESS_SCREENSHOTS=$(abspath docs/screenshots) PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest tests/browser -q

# The subjects of the commits not yet on origin/main: at most 72 characters, a blank line before the body.
commits:
	$(BIN)/python scripts/check_commits.py

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
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site

# Every target sets up .venv on first use, so a fresh clone needs nothing but Python 3.11+.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: serve test lint watch demo bench clean

# One line per step, then pip's own progress, then the time it took (a first install takes a
# minute or two: without these it looked stuck). The lines show with `make -s` too; CI reads them.
$(STAMP): pyproject.toml
	@start=$$(date +%s); \
	if [ -x $(BIN)/python ]; then \
		echo "updating $(VENV): pyproject.toml changed"; \
	else \
		echo "creating $(VENV) (first use: a virtual environment for signoff)"; \
		$(PYTHON) -m venv $(VENV) || exit 1; \
	fi; \
	echo "upgrading pip"; \
	$(BIN)/python -m pip install --upgrade pip || exit 1; \
	echo "installing signoff and its dependencies (a minute or two)"; \
	$(BIN)/python -m pip install -e '.[all,dev]' || exit 1; \
	touch $(STAMP); \
	echo "$(VENV) ready in $$(( $$(date +%s) - start )) s"

## lint and type-check, then run the whole test suite
test: lint
	$(BIN)/python -m pytest

## ruff, mypy --strict over src, tests and bench, and the layers (docs/architecture.md)
lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

## the server: HTTP API and live events on the default SQLite database
serve: $(STAMP)
	$(BIN)/signoff serve

## the server with a scripted demo agent filing requests (no API key needed)
demo: $(STAMP)
	$(BIN)/signoff demo

## live view of requests on the default database (Ctrl+C stops)
watch: $(STAMP)
	$(BIN)/signoff watch

## the benchmarks
bench: $(STAMP)
	$(BIN)/python bench/lifecycle.py
	$(BIN)/python bench/pending_scale.py
	$(BIN)/python bench/server.py
	$(BIN)/python bench/waiters.py  # 10,000 agents long-polling wait on one server
	$(BIN)/python bench/lifecycle_pg.py  # needs PostgreSQL (SIGNOFF_TEST_PG)
	$(BIN)/python bench/nodes_pg.py
	$(BIN)/python bench/pending_scale_pg.py
	$(BIN)/python bench/history.py  # history's pages at 10^3..10^6 rows (SQLite)
	$(BIN)/python bench/history.py --pg  # the same on PostgreSQL, 10^3..10^5
	$(BIN)/python bench/pause_resume.py  # LangGraph interrupt() on SQLite and PostgreSQL
	$(BIN)/python bench/writer_process.py  # 64 callers, the SQLite store's writer a thread or a process
	$(BIN)/python bench/chat_stream.py  # conversations over AG-UI against the JSON API

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache

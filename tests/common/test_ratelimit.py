"""kctl.common.ratelimit with a fake clock: `RepeatedFailures` logs a peer's first failure at
WARNING, then at most one summary per interval with the count, and one INFO line on recovery, per
key; `RateLimitFilter` lets a repeated library line through once per interval with the number held
back, and leaves other loggers alone."""

from __future__ import annotations

import logging

import pytest

from kctl.common.ratelimit import RateLimitFilter, RepeatedFailures


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(record.levelname, record.getMessage()) for record in caplog.records]


def test_first_failure_then_one_summary_per_interval_then_recovery(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    failures = RepeatedFailures(logging.getLogger("test.peers"), interval_s=60, clock=clock)
    caplog.set_level(logging.DEBUG, logger="test.peers")
    what = "cannot reach broker 2 at 127.0.0.1:9093"
    logged = []
    for second in range(150):  # one failure a second for 150 s
        clock.now = 1000.0 + second
        logged.append(failures.failed(2, what, "Connection refused"))
    assert logged.count(True) == 3 and logged[0] and logged[60] and logged[120]
    clock.now = 1200.0
    assert failures.recovered(2, "broker 2 at 127.0.0.1:9093 reachable")
    assert not failures.recovered(2, "broker 2 at 127.0.0.1:9093 reachable")  # once
    assert _lines(caplog) == [
        ("WARNING", "cannot reach broker 2 at 127.0.0.1:9093: Connection refused"),
        ("WARNING", "still cannot reach broker 2 at 127.0.0.1:9093: 60 failures in the last 60 s "
                    "(last: Connection refused)"),
        ("WARNING", "still cannot reach broker 2 at 127.0.0.1:9093: 60 failures in the last 60 s "
                    "(last: Connection refused)"),
        ("INFO", "broker 2 at 127.0.0.1:9093 reachable again after 150 failures in 200 s"),
    ]  # fmt: skip


def test_keys_are_limited_apart_and_a_new_outage_starts_over(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    failures = RepeatedFailures(logging.getLogger("test.peers"), interval_s=60, clock=clock)
    caplog.set_level(logging.DEBUG, logger="test.peers")
    assert failures.failed(2, "cannot reach broker 2")
    assert failures.failed(3, "cannot reach broker 3")  # another peer: its own first line
    clock.now += 1
    assert not failures.failed(2, "cannot reach broker 2")
    assert not failures.recovered(4, "broker 4 reachable")  # never failed: nothing to say
    assert failures.recovered(2, "broker 2 reachable")
    assert failures.failing(3) and not failures.failing(2)
    clock.now += 1
    assert failures.failed(2, "cannot reach broker 2")  # a new outage: WARNING at once
    assert [message for _, message in _lines(caplog)] == [
        "cannot reach broker 2",
        "cannot reach broker 3",
        "broker 2 reachable again after 2 failures in 1 s",
        "cannot reach broker 2",
    ]


def test_the_filter_passes_one_line_per_interval_per_template() -> None:
    clock = FakeClock()
    limit = RateLimitFilter(("kazoo",), interval_s=60, clock=clock)

    def record(name: str, msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, None)

    passed = []
    for second in range(130):
        clock.now = 1000.0 + second
        line = record("kazoo.client", "Connection dropped: %s", f"refused {second}")
        if limit.filter(line):
            passed.append(line.getMessage())
    assert passed == [
        "Connection dropped: refused 0",
        "Connection dropped: refused 60 (59 similar lines held back in the last 60 s)",
        "Connection dropped: refused 120 (59 similar lines held back in the last 60 s)",
    ]
    assert limit.filter(record("kazoo.client", "Session has expired"))  # another template
    assert limit.filter(record("kazoozle", "Connection dropped: %s", "x"))  # not under the prefix
    assert all(limit.filter(record("kctl.broker", "same line")) for _ in range(3))


def test_the_broker_process_holds_back_kazoos_retry_lines(tmp_path) -> None:
    """`kctl broker start`'s logging: kazoo's line per reconnection attempt (ZooKeeper down) is
    written once a minute at most; kctl's own lines are not touched."""
    from kctl.broker.config import BrokerConfig
    from kctl.commands.broker import _setup_logging

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    path = tmp_path / "broker.log"
    try:
        _setup_logging(BrokerConfig({"log.dirs": str(tmp_path / "data")}), "INFO", path)
        for _ in range(5):
            logging.getLogger("kazoo.client").warning("Connection dropped: %s", "refused")
            logging.getLogger("kctl.broker").warning("a line of kctl's own")
        for handler in root.handlers:
            handler.flush()
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], root.level = saved
    text = path.read_text()
    assert text.count("Connection dropped: refused") == 1
    assert text.count("a line of kctl's own") == 5

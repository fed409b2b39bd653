"""Shared test helpers: record batches built with kctl's own builder, a log factory, and the
kctl.testing pytest plugin (broker and ZooKeeper fixtures, markers) registered for every test module."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kctl.common.topic_partition import TopicPartition
from kctl.log.clock import ManualClock
from kctl.log.config import LogConfig
from kctl.log.log import Log
from kctl.records.builder import RecordBatchBuilder

# kctl's test harness: the zookeeper, broker and local_cluster_factory fixtures and the zk/e2e markers.
pytest_plugins = ["kctl.testing.pytest_plugin"]


def make_batch(
    count: int = 10,
    *,
    timestamp: int = 1_700_000_000_000,
    key_prefix: bytes | None = b"key-",
    value_size: int = 100,
    compression: str = "none",
    start: int = 0,
    keys: list[bytes | None] | None = None,
    values: list[bytes | None] | None = None,
) -> bytes:
    """A batch of ``count`` records with timestamps ``timestamp + i`` (client-style base offset 0)."""
    builder = RecordBatchBuilder(compression=compression)
    for i in range(count):
        key = (
            keys[i]
            if keys is not None
            else (None if key_prefix is None else key_prefix + b"%d" % (start + i))
        )
        value = values[i] if values is not None else (b"%d:" % (start + i)).ljust(value_size, b"x")
        builder.append(timestamp + i, key, value)
    return builder.build()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


@pytest.fixture
def open_log(tmp_path: Path, clock: ManualClock) -> Callable[..., Log]:
    """open_log(config_overrides..., **log_kwargs) -> Log in tmp_path/topic_0."""

    def factory(overrides: dict[str, str] | None = None, **kwargs: object) -> Log:
        config = LogConfig().with_overrides(overrides or {})
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("needs_recovery", False)
        return Log(tmp_path / "topic_0", TopicPartition("topic", 0), config, **kwargs)  # type: ignore[arg-type]

    return factory

"""What a replica fetcher's next request says of a partition (``FetchState.wanted``): kept between
fetches while the follower's log is unchanged (an idle follower of thousands of partitions builds
its request without reading every log), taken again once the log's offsets move or the log is
another one. On a real log in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from kctl.broker.partition import Partition
from kctl.broker.replication.fetcher import FetchState
from kctl.common.topic_partition import TopicPartition
from kctl.log.config import LogConfig
from kctl.log.log import Log
from kctl.records.builder import RecordBatchBuilder

MAX_BYTES = 1 << 20


def batch(base_offset: int, count: int) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset, partition_leader_epoch=0)
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    return builder.build()


@pytest.fixture
def state(tmp_path: Path) -> FetchState:
    tp = TopicPartition("t", 0)
    log = Log(tmp_path / "t-0", tp, LogConfig(), high_watermark_follows_log_end=False)
    partition = Partition(tp, log, leader_id=2, leader_epoch=0, replicas=(1, 2), isr=(1, 2), broker_id=1)
    return FetchState(partition, 0)


def test_kept_while_the_log_is_unchanged(state: FetchState) -> None:
    first = state.wanted(MAX_BYTES)
    assert first == (0, 0, 0, MAX_BYTES)
    assert state.wanted(MAX_BYTES) is first


@pytest.mark.parametrize("change", ["append", "truncate", "log_start", "high_watermark", "log", "max_bytes"])
def test_taken_again_when_the_log_moves(state: FetchState, change: str, tmp_path: Path) -> None:
    log = state.partition.log
    log.append_as_follower(batch(0, 4))
    log.update_high_watermark(2)
    before = state.wanted(MAX_BYTES)
    assert before == (4, 0, 0, MAX_BYTES)
    max_bytes = MAX_BYTES
    if change == "append":
        log.append_as_follower(batch(4, 2))
        expected = (6, 0, 0, MAX_BYTES)
    elif change == "truncate":
        log.truncate_fully_and_start_at(3)
        expected = (3, 0, 3, MAX_BYTES)
    elif change == "log_start":
        log.maybe_increment_log_start_offset(2)
        expected = (4, 0, 2, MAX_BYTES)
    elif change == "high_watermark":  # no offset the request names moved: the same values
        log.update_high_watermark(4)
        expected = before
    elif change == "log":  # moved to another log directory
        state.partition.log = Log(tmp_path / "moved" / "t-0", log.topic_partition, LogConfig())
        expected = (0, 0, 0, MAX_BYTES)
    else:
        max_bytes = 1024
        expected = (4, 0, 0, 1024)
    assert state.wanted(max_bytes) == expected

"""Retention: whole segments deleted by age, total size and log start offset."""

from __future__ import annotations

from conftest import make_batch

from kctl.log.retention import SegmentSummary, plan_retention

T0 = 1_700_000_000_000


def _log_with_segments(open_log, segments=5, **overrides):
    batch = make_batch(10)
    log = open_log({"segment.bytes": str(len(batch)), **overrides})
    for i in range(segments):
        log.append(make_batch(10, timestamp=T0 + i * 60_000))
    return log, len(batch)


def test_retention_by_age_deletes_expired_segments_oldest_first(open_log, clock):
    log, _ = _log_with_segments(open_log, **{"retention.ms": "150000"})
    clock.now_ms = T0 + 4 * 60_000 + 10  # segment i's newest record: T0 + i*60000 + 9
    deleted = log.delete_old_segments()
    assert [d.base_offset for d in deleted] == [0, 10]
    assert all(d.reason == "retention.ms" for d in deleted)
    assert log.log_start_offset == 20 and log.log_end_offset == 50


def test_retention_by_age_rolls_and_deletes_the_active_segment_when_all_expired(open_log, clock):
    log, _ = _log_with_segments(open_log, **{"retention.ms": "1000"})
    clock.now_ms = T0 + 10**9
    deleted = log.delete_old_segments()
    assert len(deleted) == 5
    assert log.log_start_offset == log.log_end_offset == 50
    assert log.append(make_batch(1)).first_offset == 50


def test_retention_by_size_keeps_the_newest_bytes(open_log):
    log, batch_size = _log_with_segments(open_log, **{"retention.bytes": "0"})
    log.config = log.config.with_overrides({"retention.bytes": str(batch_size * 2), "retention.ms": "-1"})
    deleted = log.delete_old_segments()
    assert [d.base_offset for d in deleted] == [0, 10, 20]
    assert log.size_in_bytes == batch_size * 2


def test_retention_by_log_start_offset(open_log):
    log, _ = _log_with_segments(open_log, **{"retention.ms": "-1"})
    log.maybe_increment_log_start_offset(25)
    deleted = log.delete_old_segments()
    assert [d.base_offset for d in deleted] == [0, 10]
    assert log.log_start_offset == 25  # offsets 20..24 stay on disk but are below the start
    assert log.read_bytes(25, 1) != b""


def test_compact_only_topics_skip_time_and_size_retention(open_log, clock):
    log, _ = _log_with_segments(open_log, **{"retention.ms": "1", "cleanup.policy": "compact"})
    clock.now_ms = T0 + 10**9
    assert log.delete_old_segments() == []


def test_plan_uses_modification_time_for_segments_without_timestamps():
    summaries = [
        SegmentSummary(0, 10, 100, -1, modified_ms=1000, is_active=False),
        SegmentSummary(10, 20, 100, -1, modified_ms=5000, is_active=True),
    ]
    decisions = plan_retention(summaries, now_ms=6000, retention_ms=2000)
    assert [d.base_offset for d in decisions] == [0]


def test_plan_never_deletes_an_empty_active_segment():
    summaries = [SegmentSummary(10, 10, 0, -1, modified_ms=0, is_active=True)]
    assert (
        plan_retention(summaries, now_ms=10**12, retention_ms=0, retention_bytes=0, log_start_offset=10) == []
    )

"""Compaction: the latest record per key survives, offsets are kept, tombstones expire."""

from __future__ import annotations

import dataclasses

from conftest import make_batch

from kctl.log.cleaner import clean_log, dirty_ratio
from kctl.records.reader import iter_batches

T0 = 1_700_000_000_000


def _records(log):
    data = b"".join(segment.read_batch_bytes(0, segment.size) for segment in log.segments)
    return [(r.offset, r.key, r.value) for batch in iter_batches(data) for r in batch.records]


def _compacted_log(open_log, clock):
    batch = make_batch(4, keys=[b"a", b"b", b"c", b"d"], values=[b"1"] * 4)
    log = open_log(
        {"segment.bytes": str(len(batch)), "cleanup.policy": "compact", "delete.retention.ms": "1000"}
    )
    log.append(
        make_batch(4, timestamp=T0, keys=[b"a", b"b", b"c", b"d"], values=[b"a1", b"b1", b"c1", b"d1"])
    )
    log.append(make_batch(4, timestamp=T0, keys=[b"a", b"b", b"e", b"c"], values=[b"a2", b"b2", b"e1", None]))
    # a keyless record written before the topic became compacted (producers are refused one now)
    compact_config = log.config
    log.config = dataclasses.replace(compact_config, cleanup_policy=frozenset({"delete"}))
    log.append(make_batch(2, timestamp=T0, keys=[b"a", None], values=[b"a3", b"no-key"]))
    log.config = compact_config
    log.append(make_batch(1, timestamp=T0, keys=[b"a"], values=[b"a4-active"]))  # active segment
    return log


def test_compaction_keeps_the_latest_record_per_key_and_offsets(open_log, clock):
    log = _compacted_log(open_log, clock)
    assert dirty_ratio(log, 0) == 1.0
    result = clean_log(log, clock)
    assert result.records_removed == 4  # a1 b1 c1 a2; a3 stays: only the active segment supersedes it
    assert _records(log) == [
        (3, b"d", b"d1"),
        (5, b"b", b"b2"),
        (6, b"e", b"e1"),
        (7, b"c", None),  # tombstone, younger than delete.retention.ms
        (8, b"a", b"a3"),
        (9, None, b"no-key"),
        (10, b"a", b"a4-active"),
    ]
    assert log.log_end_offset == 11
    # a compacted batch keeps its offset range: the next append continues at 11
    assert log.append(make_batch(1)).first_offset == 11
    assert [s.base_offset for s in log.segments][:3] == [0, 4, 8]


def test_tombstones_are_dropped_after_delete_retention(open_log, clock):
    log = _compacted_log(open_log, clock)
    clean_log(log, clock)
    clock.now_ms = T0 + 5000
    result = clean_log(log, clock)
    assert result.tombstones_removed == 1
    assert (7, b"c", None) not in _records(log)


def test_compaction_survives_reopen_and_reads_skip_gaps(open_log, clock):
    log = _compacted_log(open_log, clock)
    clean_log(log, clock)
    log.close()
    from kctl.log.log import Log

    reopened = Log(log.directory, log.topic_partition, log.config, clock=clock, recovery_point=0)
    assert reopened.log_end_offset == 11
    batches = list(iter_batches(reopened.read_bytes(0, 1 << 20)))
    assert batches[0].records[0].offset == 3
    assert next(r.offset for b in iter_batches(reopened.read_bytes(1, 1 << 20)) for r in b.records) == 3


def test_min_compaction_lag_protects_recent_segments(open_log, clock):
    log = _compacted_log(open_log, clock)
    log.config = log.config.with_overrides({"min.compaction.lag.ms": "60000"})
    result = clean_log(log, clock)
    assert result.segments_cleaned == 0
    assert len(_records(log)) == 11


def test_dirty_ratio_gates_cleaning_and_huge_batches_stay_opaque(open_log, clock):
    from kctl.log.cleaner import needs_cleaning

    log = _compacted_log(open_log, clock)
    assert needs_cleaning(log)
    clean_log(log, clock)
    assert not needs_cleaning(log)  # everything below the active segment is clean now
    # a batch whose records decompress past the limit is kept byte for byte, not expanded
    batch = make_batch(50, keys=[b"z"] * 50, values=[b"x" * 10_000] * 50, compression="zstd")
    log.roll()
    log.append(batch)
    log.roll()
    before = _records(log)
    clean_log(log, clock, max_decompressed_size=1000)
    assert [r for r in _records(log) if r[1] == b"z"] == [r for r in before if r[1] == b"z"]

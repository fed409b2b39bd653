"""Idempotent-producer state across segment rolls, restarts, truncation and retention: producer
snapshots (``<offset>.snapshot``), their format, when they are written, trusted, ignored and deleted."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from conftest import make_batch

from kctl.common.topic_partition import TopicPartition
from kctl.log.config import LogConfig
from kctl.log.inspect import NotASegmentError, segment_logs
from kctl.log.log import Log
from kctl.log.manager import LogManager
from kctl.log.producer_state import (
    RECENT_BATCHES,
    BatchRecord,
    CorruptSnapshotError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
)
from kctl.log.tools import purge, recover
from kctl.log.verify import verify
from kctl.records.builder import RecordBatchBuilder

PID = 4242
EPOCH = 3
RECORDS = 5  # records per idempotent batch: batch n holds sequences [5n, 5n + 4]


def idempotent_batch(
    n: int, *, producer_id: int = PID, epoch: int = EPOCH, sequence: int | None = None
) -> bytes:
    """The ``n``-th batch of an idempotent producer (sequences 5n..5n+4 unless ``sequence`` is given)."""
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=RECORDS * n if sequence is None else sequence,
    )
    for i in range(RECORDS):
        builder.append(1_700_000_000_000 + n * RECORDS + i, b"k%d" % i, b"value-%d-%d" % (n, i))
    return builder.build()


def snapshots(log_or_dir: Log | Path) -> list[str]:
    directory = log_or_dir.directory if isinstance(log_or_dir, Log) else log_or_dir
    return sorted(path.name for path in directory.iterdir() if path.name.endswith(".snapshot"))


def name(offset: int) -> str:
    return f"{offset:020d}.snapshot"


def reopen_unclean(log: Log, recovery_point: int = 0) -> Log:
    """Open the directory again without closing ``log`` first: as after kill -9 (see test_log_recovery)."""
    return Log(
        log.directory,
        log.topic_partition,
        log.config,
        recovery_point=recovery_point,
        needs_recovery=True,
        clock=log._clock,
    )


def write_history(log: Log) -> dict[int, tuple[int, int]]:
    """Producer batches 0-1, roll, other traffic and batches 2-3, roll, more traffic.
    Returns batch number -> (first offset, last offset)."""
    offsets = {}
    for n in (0, 1):
        info = log.append(idempotent_batch(n))
        offsets[n] = (info.first_offset, info.last_offset)
    log.roll()
    log.append(make_batch(10))  # a non-idempotent producer
    for n in (2, 3):
        info = log.append(idempotent_batch(n))
        offsets[n] = (info.first_offset, info.last_offset)
    log.roll()
    log.append(make_batch(10))
    return offsets


def assert_state_survived(log: Log, offsets: dict[int, tuple[int, int]]) -> None:
    """Retries are deduplicated (also one from the oldest segment), gaps and older epochs refused, and
    the next batch in sequence is appended."""
    end = log.log_end_offset
    for n in (0, 3):
        retry = log.append(idempotent_batch(n))
        assert retry.duplicate
        assert (retry.first_offset, retry.last_offset) == offsets[n]
        assert log.log_end_offset == end  # nothing appended
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(6))  # expected batch 4 (sequence 20), got sequence 30
    with pytest.raises(InvalidProducerEpochError):
        log.append(idempotent_batch(4, epoch=EPOCH - 1))
    assert log.log_end_offset == end
    appended = log.append(idempotent_batch(4))
    assert not appended.duplicate and appended.first_offset == end


# -- the format ----------------------------------------------------------------------------------
def _sample_producers() -> dict[int, ProducerEntry]:
    entry = ProducerEntry(7)
    for n in range(RECENT_BATCHES):
        entry.batches.append(BatchRecord(5 * n, 5 * n + 4, 100 + 5 * n, 104 + 5 * n, 1_700_000_000_000 + n))
    return {1: ProducerEntry(0), 99: entry}


def test_snapshot_round_trip():
    producers = _sample_producers()
    data = encode_snapshot(130, producers)
    offset, decoded = decode_snapshot(data, 130)
    assert offset == 130
    assert decoded.keys() == producers.keys()
    assert decoded[99].epoch == 7 and list(decoded[99].batches) == list(producers[99].batches)
    assert decoded[1].epoch == 0 and not decoded[1].batches


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d[:-1], "CRC mismatch"),
        (lambda d: d[:9], "too few"),
        (lambda d: b"", "too few"),
        (lambda d: d[:30] + bytes([d[30] ^ 0x01]) + d[31:], "CRC mismatch"),
        (lambda d: b"XXXX" + d[4:], "bad magic"),
        (lambda d: d[:4] + b"\x00\x09" + d[6:], "unsupported snapshot version 9"),
    ],
    ids=["one-byte-short", "torn-header", "empty", "flipped-bit", "magic", "version"],
)
def test_damaged_snapshots_are_refused(damage, message):
    data = encode_snapshot(130, _sample_producers())
    with pytest.raises(CorruptSnapshotError, match=message):
        decode_snapshot(damage(data), 130)


def test_snapshot_must_match_its_name_and_hold_only_batches_below_its_offset():
    data = encode_snapshot(130, _sample_producers())
    with pytest.raises(CorruptSnapshotError, match="its name says 140"):
        decode_snapshot(data, 140)
    with pytest.raises(CorruptSnapshotError, match="not below the snapshot offset"):
        decode_snapshot(encode_snapshot(110, _sample_producers()), 110)  # batches reach offset 124


# -- when snapshots are written ------------------------------------------------------------------
def test_appends_write_no_snapshot_rolls_and_close_do(open_log):
    log = open_log()
    for n in range(20):
        log.append(idempotent_batch(n))
    assert snapshots(log) == []  # the hot path never writes one
    log.roll()
    assert snapshots(log) == [name(100)]
    assert read_snapshot(log.directory / name(100))[PID].batches[-1].last_offset == 99
    log.append(idempotent_batch(20))
    log.close()
    assert snapshots(log) == [name(100), name(105)]
    state = read_snapshot(log.directory / name(105))[PID]
    assert state.epoch == EPOCH
    assert [batch.first_sequence for batch in state.batches] == [80, 85, 90, 95, 100]


def test_a_roll_by_size_snapshots_the_state_at_the_new_base_offset(open_log):
    size = len(idempotent_batch(0))
    log = open_log({"segment.bytes": str(size * 3)})
    for n in range(7):
        log.append(idempotent_batch(n))
    assert [segment.base_offset for segment in log.segments] == [0, 15, 30]
    assert snapshots(log) == [name(15), name(30)]
    assert read_snapshot(log.directory / name(30))[PID].last_sequence == 29  # not batch 6, at offset 30


# -- restarts ------------------------------------------------------------------------------------
def test_state_survives_a_roll_and_a_clean_restart(open_log):
    log = open_log()
    offsets = write_history(log)
    log.close()
    reopened = open_log()
    assert reopened.producer_state.producers.keys() == {PID}
    assert_state_survived(reopened, offsets)


def test_state_survives_a_roll_and_an_unclean_restart(open_log):
    log = open_log()
    offsets = write_history(log)
    reopened = reopen_unclean(log)  # no close(): no snapshot at the log end
    assert reopened.recovery_plan  # recovery ran
    assert_state_survived(reopened, offsets)


def test_state_of_a_producer_whose_segments_retention_deleted_comes_from_the_snapshot(open_log):
    """Only the snapshot remembers batches in deleted segments: replaying what is left cannot."""
    log = open_log()
    offsets = write_history(log)
    log.delete_old_segments(log_start_offset=10)  # the first segment (batches 0 and 1) goes
    assert log.segments[0].base_offset == 10
    log.close()
    reopened = open_log()
    retry = reopened.append(idempotent_batch(1))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == offsets[1]
    assert_state_survived(reopened, offsets)


def test_unclean_restart_trusts_snapshots_at_or_below_the_recovery_point(open_log):
    log = open_log()
    offsets = write_history(log)
    log.delete_old_segments(log_start_offset=10)
    log.flush()  # the recovery point passes both snapshots (10 and 30)
    recovery_point = log.recovery_point
    log.append(make_batch(10))
    reopened = reopen_unclean(log, recovery_point=recovery_point)
    assert snapshots(reopened) == [name(10), name(30)]
    assert_state_survived(reopened, offsets)


def test_unclean_restart_distrusts_snapshots_above_the_recovery_point(open_log):
    """A snapshot above the recovery point may describe batches the crash lost: here the unflushed
    first segment is lost entirely, yet the snapshot taken at the roll still mentions its batches."""
    log = open_log()
    for n in (0, 1):
        log.append(idempotent_batch(n))
    log.roll()  # snapshot at 10 records batches 0 and 1
    log.append(make_batch(10))
    os.truncate(log.segments[0].path, 0)  # the page cache never reached the disk
    clean = open_log()  # had the stop been clean, the snapshot would be believed
    assert clean.producer_state.producers[PID].last_sequence == 9
    crashed = reopen_unclean(log, recovery_point=0)
    assert snapshots(crashed) == []  # deleted, not trusted
    assert crashed.producer_state.producers == {}
    again = crashed.append(idempotent_batch(0))  # accepted as new data, not answered as a duplicate
    assert not again.duplicate and again.first_offset == 20


def test_load_replays_only_from_the_snapshot(open_log):
    """With a snapshot at the log end nothing is replayed: a producer only in the (intact) segments but
    not in the snapshot is unknown. Proves the snapshot, not a full replay, is what was loaded."""
    log = open_log()
    log.append(idempotent_batch(0))
    log.close()
    path = log.directory / name(5)
    path.write_bytes(encode_snapshot(5, {}))  # a valid snapshot claiming no producers
    reopened = open_log()
    assert reopened.producer_state.producers == {}
    path.unlink()
    replayed = open_log()  # no snapshot left: everything is replayed
    assert replayed.producer_state.producers.keys() == {PID}


def test_a_snapshot_below_the_oldest_segment_is_not_used(open_log):
    """Batches between such a snapshot and the oldest segment are gone, so its state would be stale."""
    log = open_log()
    write_history(log)
    log.delete_old_segments(log_start_offset=10)
    log.close()
    for stale in snapshots(log):
        (log.directory / stale).unlink()
    entry = ProducerEntry(EPOCH)
    entry.batches.append(BatchRecord(0, 4, 0, 4, 1_700_000_000_000))  # batch 0, not batch 1 (5..9)
    (log.directory / name(5)).write_bytes(encode_snapshot(5, {PID: entry}))
    reopened = open_log()
    assert [b.first_sequence for b in reopened.producer_state.producers[PID].batches] == [10, 15]


# -- corrupt snapshots -------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "flipped_byte", "empty", "garbage", "misnamed"])
def test_a_corrupt_snapshot_is_ignored_deleted_and_the_state_rebuilt(open_log, caplog, damage):
    log = open_log()
    offsets = write_history(log)
    log.close()
    end = log.log_end_offset
    path = log.directory / name(end)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) - 7])
    elif damage == "flipped_byte":
        path.write_bytes(data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    else:  # a valid snapshot under the wrong name
        path.unlink()
        path = log.directory / name(end - 1)
        path.write_bytes(data)
    with caplog.at_level(logging.WARNING, logger="kctl.log"):
        reopened = open_log()
    assert not path.exists()
    assert "ignoring producer snapshot" in caplog.text
    assert snapshots(reopened) == [name(10), name(30)]  # the older, valid ones are kept
    assert_state_survived(reopened, offsets)


def test_a_corrupt_newest_snapshot_falls_back_to_an_older_valid_one(open_log):
    log = open_log()
    offsets = write_history(log)
    log.delete_old_segments(log_start_offset=10)  # batches 0-1 now live only in snapshots
    log.close()
    (log.directory / name(log.log_end_offset)).write_bytes(b"KCPS\x00\x01torn")
    reopened = open_log()
    retry = reopened.append(idempotent_batch(1))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == offsets[1]


def test_a_snapshot_that_cannot_be_written_does_not_fail_the_roll(open_log, caplog):
    log = open_log()
    log.append(idempotent_batch(0))
    (log.directory / (name(5) + ".tmp")).mkdir()  # the temp file cannot be created
    with caplog.at_level(logging.WARNING, logger="kctl.log"):
        log.roll()
    assert "could not write the producer snapshot at 5" in caplog.text
    assert log.append(idempotent_batch(1)).first_offset == 5
    (log.directory / (name(5) + ".tmp")).rmdir()


# -- truncation and retention --------------------------------------------------------------------
def test_truncate_to_deletes_snapshots_above_the_end_and_reloads_the_state(open_log):
    log = open_log()
    for n in range(10):  # batch n holds offsets 5n..5n+4; a segment of two batches each
        log.append(idempotent_batch(n))
        if n % 2:
            log.roll()
    assert snapshots(log) == [name(offset) for offset in (10, 20, 30, 40, 50)]
    log.truncate_to(25)  # batches 5..9 go
    assert log.log_end_offset == 25
    assert snapshots(log) == [name(10), name(20)]
    # the last five batches were all truncated; batches 0-4 are known again, from snapshot + replay
    assert [b.first_sequence for b in log.producer_state.producers[PID].batches] == [0, 5, 10, 15, 20]
    retry = log.append(idempotent_batch(4))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (20, 24)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(7))
    assert log.append(idempotent_batch(5)).first_offset == 25
    log.close()
    reopened = open_log()
    assert reopened.producer_state.producers[PID].last_sequence == 29


def test_truncate_fully_deletes_every_snapshot_and_forgets_producers(open_log):
    log = open_log()
    write_history(log)
    log.truncate_fully_and_start_at(1000)
    assert snapshots(log) == []
    assert log.producer_state.producers == {}
    assert not log.append(idempotent_batch(0)).duplicate


def test_retention_deletes_old_snapshots_and_their_count_stays_bounded(open_log):
    log = open_log({"retention.bytes": str(len(idempotent_batch(0)) * 4)})
    for n in range(200):
        log.append(idempotent_batch(n))
        if n % 2:
            log.roll()
            log.delete_old_segments()
        names = snapshots(log)
        assert len(names) <= len(log.segments)
        assert all(int(entry[:20]) >= log.segments[0].base_offset for entry in names)
    assert len(log.segments) <= 3
    assert snapshots(log)[0] == name(log.segments[0].base_offset)
    log.close()
    reopened = open_log()
    retry = reopened.append(idempotent_batch(199))
    assert retry.duplicate and retry.first_offset == 995


def test_delete_snapshots_before_keeps_the_newest(tmp_path):
    state = ProducerStateManager(tmp_path)
    for offset in (10, 20, 30):
        state.take_snapshot(offset)
    assert state.delete_snapshots_before(25) == 2
    assert snapshots(tmp_path) == [name(30)]
    assert state.delete_snapshots_before(100) == 0  # the newest is always kept
    assert snapshots(tmp_path) == [name(30)]


# -- the directory scan and the offline tools ----------------------------------------------------
def test_snapshots_are_neither_segments_nor_leftovers(open_log):
    log = open_log()
    write_history(log)
    log.close()
    (log.directory / (name(40) + ".tmp")).write_bytes(b"half-written")  # crash while writing one
    reopened = open_log()
    assert [segment.base_offset for segment in reopened.segments] == [0, 10, 30]
    assert snapshots(reopened) == [name(10), name(30), name(40)]
    assert not (reopened.directory / (name(40) + ".tmp")).exists()
    assert [base for base, _ in segment_logs(reopened.directory)] == [0, 10, 30]
    with pytest.raises(NotASegmentError, match="producer snapshot"):
        segment_logs(reopened.directory / name(40))


def test_verify_checks_snapshots(open_log):
    log = open_log()
    write_history(log)
    log.close()
    report = verify(log.directory)
    assert report.clean and report.segments == 3 and not report.notes
    (log.directory / name(90)).write_bytes(encode_snapshot(90, {}))  # above the log end
    (log.directory / name(10)).write_bytes(b"torn")
    report = verify(log.directory)
    assert [(finding.file, finding.offset) for finding in report.findings] == [(name(10), 10)]
    assert "cannot be trusted" in report.findings[0].problem
    assert any(name(90) in note and "above the log end" in note for note in report.notes)


def test_recover_and_purge_keep_snapshots_consistent(open_log):
    log = open_log()
    offsets = write_history(log)
    log.close()
    (log.directory / name(90)).write_bytes(encode_snapshot(90, {}))  # stale: above the log end
    purged = purge(log.directory, before_offset=10)
    assert [decision.base_offset for decision in purged.deleted] == [0]
    assert snapshots(log) == [name(10), name(30), name(40)]  # the stale one is gone
    report = recover(log.directory)  # recovers from the log start: later snapshots are not trusted
    assert not report.damaged
    assert snapshots(log) == [name(10), name(40)]
    reopened = open_log()
    assert_state_survived(reopened, offsets)


def test_log_manager_restarts_keep_producer_state(tmp_path):
    tp = TopicPartition("orders", 0)
    config = LogConfig().with_overrides({"segment.bytes": str(len(idempotent_batch(0)) * 2)})
    manager = LogManager([tmp_path], config, broker_id=0)
    log = manager.get_or_create_log(tp)
    first = log.append(idempotent_batch(0))
    for n in range(1, 4):
        log.append(idempotent_batch(n))
    log.delete_old_segments(log_start_offset=10)  # batch 0's segment goes
    manager.close()
    manager = LogManager([tmp_path], broker_id=0, default_config=config)
    log = manager.get_log(tp)
    retry = log.append(idempotent_batch(0))
    assert retry.duplicate and retry.first_offset == first.first_offset
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(9))
    manager.close()


def test_producers_silent_past_the_expiration_are_forgotten(open_log, clock):
    log = open_log()
    log.append(idempotent_batch(0, producer_id=1))  # timestamps 1_700_000_000_000 + 0..4
    clock.advance(60_000)
    fresh = RecordBatchBuilder(producer_id=2, producer_epoch=EPOCH, base_sequence=0)
    fresh.append(clock.time_ms(), None, b"recent")
    log.append(fresh.build())
    gap = RecordBatchBuilder(producer_id=2, producer_epoch=EPOCH, base_sequence=7)
    gap.append(clock.time_ms(), None, b"gap")

    assert log.remove_expired_producers(expiration_ms=30_000) == 1
    assert set(log.producer_state.producers) == {2}
    # producer 1 is forgotten: a batch far ahead in its sequence is accepted as from a new producer
    log.append(idempotent_batch(0, producer_id=1, sequence=500))
    with pytest.raises(OutOfOrderSequenceError):  # producer 2 is still known: a gap is refused
        log.append(gap.build())
    assert log.remove_expired_producers(expiration_ms=30_000) == 1  # the new batch's timestamps are old too
    log.close()
    [snapshot] = snapshots(log)
    assert set(read_snapshot(log.directory / snapshot)) == {2}


def test_a_new_producer_must_start_at_sequence_0_where_no_producer_can_have_been_forgotten(open_log):
    """A log that has lost nothing since offset 0 knows every producer that wrote to it: a producer
    it does not know whose first batch is not at sequence 0 lost an earlier batch on its way (refused
    by a broker not yet leader, or written to an old leader and lost with it). Accepting the later
    batch would let librdkafka take the missing one for written; refused, the producer resends it."""
    log = open_log()
    assert log.knows_every_producer
    with pytest.raises(OutOfOrderSequenceError, match="must have sequence 0, not 5"):
        log.append(idempotent_batch(1, producer_id=3))
    assert log.log_end_offset == 0
    log.append(idempotent_batch(0, producer_id=3))
    log.append(idempotent_batch(1, producer_id=3))
    assert log.log_end_offset == 2 * RECORDS
    log.close()
    reopened = open_log()  # the rule holds after a restart too
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append(idempotent_batch(4, producer_id=4))
    reopened.close()


@pytest.mark.parametrize("loss", ["log start moved", "compacted topic", "producer expired"])
def test_a_new_producer_may_start_anywhere_where_its_state_may_have_been_forgotten(open_log, clock, loss):
    """Where a producer's state may have gone with its records (KIP-360: retention or DeleteRecords
    moved the log start, compaction, producer.id.expiration.ms), its next batch is accepted at any
    sequence, as Kafka does; an expiry is remembered across restarts."""
    overrides = {"cleanup.policy": "compact"} if loss == "compacted topic" else None
    log = open_log(overrides)
    log.append(idempotent_batch(0, producer_id=1))
    log.update_high_watermark(log.log_end_offset)
    if loss == "log start moved":
        assert log.maybe_increment_log_start_offset(2)
    elif loss == "producer expired":
        clock.advance(10_000)
        assert log.remove_expired_producers(expiration_ms=5_000) == 1
        log.close()
        reason = (log.directory / "producer-state.incomplete").read_text()
        assert "producer.id.expiration.ms forgot producer(s) [1]" in reason
        log = open_log(overrides)
    assert not log.knows_every_producer
    log.append(idempotent_batch(7, producer_id=2))
    assert log.log_end_offset == 2 * RECORDS
    log.close()


def test_the_log_manager_expires_producers_in_every_log(tmp_path, clock):
    with LogManager([tmp_path / "data"], LogConfig(), clock=clock) as manager:
        old, recent = (
            manager.get_or_create_log(TopicPartition("a", 0)),
            manager.get_or_create_log(TopicPartition("b", 0)),
        )
        old.append(idempotent_batch(0, producer_id=1))
        clock.advance(10_000)
        batch = RecordBatchBuilder(producer_id=2, producer_epoch=EPOCH, base_sequence=0)
        batch.append(clock.time_ms(), None, b"x")
        recent.append(batch.build())
        assert manager.remove_expired_producers(5_000) == {TopicPartition("a", 0): 1}
        assert manager.remove_expired_producers(5_000) == {}

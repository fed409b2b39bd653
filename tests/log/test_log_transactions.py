"""The partition leader's side of transactions in the log: transactional batches open a producer's
transaction, COMMIT/ABORT control batches close it, the last stable offset, the aborted-transaction index
(``.txnindex``, Kafka's 34-byte entries) across rolls, restarts, recovery, truncation and retention, and
producer snapshots carrying ongoing transactions (version 1 files still read)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kctl.log.log import Log
from kctl.log.producer_state import (
    BatchRecord,
    InvalidCoordinatorEpochError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerEntry,
    decode_snapshot,
    encode_snapshot,
)
from kctl.log.transactions import AbortedTxn, TransactionIndex, encode_marker, marker_of
from kctl.records.builder import RecordBatchBuilder
from kctl.records.crc import crc32c
from kctl.records.header import parse_header
from kctl.records.reader import iter_batches
from kctl.records.record import ControlRecord

T0 = 1_700_000_000_000


def txn_batch(producer_id: int, sequence: int, count: int = 3, *, epoch: int = 0) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, is_transactional=True
    )
    for i in range(count):
        builder.append(T0 + i, b"k", b"p%d-%d" % (producer_id, sequence + i))
    return builder.build()


def plain_batch(count: int = 2) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(T0 + i, None, b"plain-%d" % i)
    return builder.build()


def txn_files(log: Log) -> list[str]:
    return sorted(p.name for p in log.directory.iterdir() if p.name.endswith(".txnindex"))


def test_control_marker_format():
    batch = encode_marker(7, 2, 5, commit=False, timestamp=T0)
    header = parse_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, -1)
    [decoded] = list(iter_batches(batch))
    [record] = decoded.records
    assert record.key == struct.pack(">hh", 0, 0)  # version 0, ABORT
    assert record.value == struct.pack(">hi", 0, 5)  # version 0, coordinator epoch
    control = marker_of(batch)
    assert isinstance(control, ControlRecord) and control.is_abort and control.coordinator_epoch == 5
    assert marker_of(encode_marker(7, 2, 5, commit=True, timestamp=T0)).is_commit  # type: ignore[union-attr]
    assert marker_of(plain_batch()) is None


def test_no_transaction_means_the_lso_is_the_high_watermark(open_log):
    log = open_log()
    log.append(plain_batch())
    assert log.last_stable_offset == log.high_watermark == 2
    assert not log.producer_state.ongoing and txn_files(log) == []


def test_lso_stops_at_the_first_ongoing_transaction_and_moves_on_commit(open_log):
    log = open_log()
    log.append(plain_batch())  # 0-1
    log.append(txn_batch(1, 0))  # 2-4, producer 1's transaction
    log.append(txn_batch(2, 0))  # 5-7, producer 2's transaction
    log.append(plain_batch())  # 8-9
    assert log.high_watermark == 10 and log.last_stable_offset == 2
    info = log.append_control_marker(1, 0, 0, commit=True)  # offset 10
    assert info.first_offset == info.last_offset == 10
    assert log.last_stable_offset == 5
    log.append_control_marker(2, 0, 0, commit=True)
    assert log.last_stable_offset == log.high_watermark == 12
    assert txn_files(log) == []  # commits are not indexed


def test_an_abort_is_indexed_with_kafkas_entry_format(open_log):
    log = open_log()
    log.append(txn_batch(1, 0))  # 0-2
    log.append(txn_batch(2, 0))  # 3-5
    log.append(txn_batch(1, 3))  # 6-8
    log.append_control_marker(1, 0, 4, commit=False)  # 9; producer 2 still open at 3
    assert log.last_stable_offset == 3
    assert log.aborted_transactions(0, 10) == [AbortedTxn(1, 0, 9, 3)]
    [name] = txn_files(log)
    data = (log.directory / name).read_bytes()
    assert data == struct.pack(">hqqqq", 0, 1, 0, 9, 3)
    log.append_control_marker(2, 0, 4, commit=False)  # 10; nothing open: LSO = 11
    assert log.aborted_transactions(0, 11) == [AbortedTxn(1, 0, 9, 3), AbortedTxn(2, 3, 10, 11)]
    assert log.aborted_transactions(10, 11) == [AbortedTxn(2, 3, 10, 11)]
    assert log.aborted_transactions(0, 3) == [AbortedTxn(1, 0, 9, 3)]  # complete at the first entry


def test_fenced_markers_are_refused(open_log):
    log = open_log()
    log.append(txn_batch(1, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        log.append_control_marker(1, 2, 0, commit=True)
    log.append_control_marker(1, 3, 5, commit=False)
    with pytest.raises(InvalidCoordinatorEpochError):
        log.append_control_marker(1, 3, 4, commit=False)


def test_lso_waits_for_the_marker_to_be_replicated(open_log):
    log = open_log(high_watermark_follows_log_end=False)
    log.append(txn_batch(1, 0))  # 0-2
    log.update_high_watermark(3)
    assert log.last_stable_offset == 0
    log.append_control_marker(1, 0, 0, commit=True)  # 3
    log.update_high_watermark(3)
    assert log.last_stable_offset == 0  # marker not below the high watermark yet
    log.update_high_watermark(4)
    assert log.last_stable_offset == 4


def test_followers_record_markers_and_index_aborts(open_log, tmp_path):
    leader = open_log()
    leader.append(txn_batch(1, 0))
    leader.append_control_marker(1, 0, 0, commit=False)
    follower = Log(tmp_path / "follower_0", leader.topic_partition, leader.config)
    follower.append_as_follower(leader.read_bytes(0, 1 << 20))
    assert follower.aborted_transactions(0, 4) == [AbortedTxn(1, 0, 3, 4)]
    assert not follower.producer_state.ongoing


def test_ongoing_transactions_survive_rolls_and_restarts(open_log):
    log = open_log({"segment.bytes": "200"})
    log.append(txn_batch(1, 0))
    log.append(plain_batch())
    log.append(txn_batch(2, 0))
    log.append_control_marker(2, 0, 0, commit=False)
    assert len(log.segments) > 1
    lso = log.last_stable_offset
    aborted = log.aborted_transactions(0, log.log_end_offset)
    log.close()
    again = open_log({"segment.bytes": "200"})
    assert again.last_stable_offset == lso == 0
    assert again.producer_state.ongoing == {1: 0}
    assert again.aborted_transactions(0, again.log_end_offset) == aborted
    again.append_control_marker(1, 0, 0, commit=True)
    assert again.last_stable_offset == again.log_end_offset


def test_recovery_rebuilds_a_lost_txn_index_and_truncation_cuts_it(open_log):
    log = open_log()
    log.append(txn_batch(1, 0))  # 0-2
    log.append_control_marker(1, 0, 0, commit=False)  # 3
    log.append(txn_batch(2, 0))  # 4-6
    log.append_control_marker(2, 0, 0, commit=False)  # 7
    [name] = txn_files(log)
    (log.directory / name).unlink()  # lost in a crash; no snapshot either
    for path in log.directory.glob("*.snapshot"):
        path.unlink()
    reopened = Log(log.directory, log.topic_partition, log.config, needs_recovery=True, clock=log._clock)
    assert reopened.aborted_transactions(0, 8) == [AbortedTxn(1, 0, 3, 4), AbortedTxn(2, 4, 7, 8)]
    assert txn_files(reopened) == [name]
    reopened.truncate_to(7)  # producer 2's marker goes: its transaction is open again
    assert reopened.aborted_transactions(0, 8) == [AbortedTxn(1, 0, 3, 4)]
    assert reopened.producer_state.ongoing == {2: 4}
    assert reopened.last_stable_offset == 4


def test_txn_index_goes_with_its_segment(open_log, clock):
    log = open_log({"segment.bytes": "200"})
    log.append(txn_batch(1, 0))
    log.append_control_marker(1, 0, 0, commit=False)
    for _ in range(4):
        log.append(plain_batch())
    assert txn_files(log) and len(log.segments) > 1
    clock.advance(60_000)
    assert log.delete_old_segments(retention_ms=1000)
    assert txn_files(log) == []


def test_a_torn_txn_index_entry_is_cut_off(tmp_path: Path):
    from kctl.log.files import DEFAULT_FILE_IO

    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 0, 9, 10) + b"\x00" * 20)
    index = TransactionIndex(path, DEFAULT_FILE_IO)
    assert index.entries == [AbortedTxn(1, 0, 9, 10)]
    assert path.stat().st_size == 34


def test_snapshots_carry_ongoing_transactions_and_version_1_is_still_read():
    entry = ProducerEntry(4, coordinator_epoch=9, current_txn_first_offset=120)
    entry.batches.append(BatchRecord(0, 4, 120, 124, T0))
    _, producers = decode_snapshot(encode_snapshot(130, {5: entry}), 130)
    assert producers[5].current_txn_first_offset == 120 and producers[5].coordinator_epoch == 9
    body = (
        struct.pack(">qi", 130, 1) + struct.pack(">qhb", 5, 4, 1) + struct.pack(">iiqqq", 0, 4, 120, 124, T0)
    )
    v1 = b"KCPS" + struct.pack(">hI", 1, crc32c(body)) + body
    _, old = decode_snapshot(v1, 130)
    assert old[5].epoch == 4 and old[5].current_txn_first_offset == -1
    assert list(old[5].batches) == [BatchRecord(0, 4, 120, 124, T0)]


def test_the_replay_keeps_an_index_whose_entries_it_meets_again(open_log):
    log = open_log()
    log.append(txn_batch(1, 0))  # 0-2
    log.append_control_marker(1, 0, 0, commit=False)  # 3
    log.append(txn_batch(2, 0))  # 4-6
    log.append_control_marker(2, 0, 0, commit=False)  # 7
    [name] = txn_files(log)
    path = log.directory / name
    path.write_bytes(path.read_bytes()[34:])  # the first entry lost, the second kept
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    reopened = Log(log.directory, log.topic_partition, log.config, needs_recovery=True, clock=log._clock)
    assert reopened.aborted_transactions(0, 8) == [AbortedTxn(1, 0, 3, 4), AbortedTxn(2, 4, 7, 8)]
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 1, 0, 3, 4) + struct.pack(">hqqqq", 0, 2, 4, 7, 8)


def test_a_non_transactional_write_inside_a_transaction_is_refused(open_log):
    log = open_log()
    log.append(txn_batch(1, 0))  # 0-2
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=3)
    builder.append(T0, None, b"not in the transaction")
    with pytest.raises(InvalidTxnStateError):
        log.append(builder.build())
    assert log.log_end_offset == 3
    log.append_control_marker(1, 0, 0, commit=True)  # 3
    log.append(builder.build())  # allowed once the transaction is over
    assert log.log_end_offset == 5


def test_a_new_producer_epoch_keeps_the_ongoing_transaction(open_log):
    log = open_log()
    log.append(txn_batch(1, 0, epoch=0))  # 0-2: epoch 0's transaction, no marker yet
    log.append(txn_batch(1, 0, epoch=1))  # 3-5
    assert log.producer_state.producers[1].current_txn_first_offset == 0
    assert log.last_stable_offset == 0

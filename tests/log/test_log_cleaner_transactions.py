"""Compaction of transactional data on real segment files (KIP-98, KIP-534): the batches of aborted
transactions are removed (and never hide a committed value of their keys), committed data is compacted
as any, COMMIT/ABORT markers stay while data of their transaction is left and then for
``delete.retention.ms`` after the cleaner first found them removable, data at or past the last stable
offset (an open transaction) is never cleaned, the ``.txnindex`` and the producer state (rebuilt from
the cleaned log) stay right, ``kctl log verify`` passes on the cleaned log, and a read_committed read
is the same before and after cleaning."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.common.topic_partition import TopicPartition
from kctl.log.cleaner import clean_log
from kctl.log.clock import ManualClock
from kctl.log.config import LogConfig
from kctl.log.log import Log
from kctl.log.manager import LogManager
from kctl.log.transactions import AbortedTxn, marker_of
from kctl.log.verify import verify
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import DELETE_HORIZON_FLAG_MASK
from kctl.records.reader import iter_batches

TP = TopicPartition("txn", 0)
T0 = 1_700_000_000_000
RETENTION_MS = 1000
CONFIG = LogConfig(cleanup_policy=frozenset({"compact"}), delete_retention_ms=RETENTION_MS)

Row = tuple[int, bytes | None, bytes | None]


def txn(producer_id: int, pairs: list[tuple[bytes, bytes]]) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    for key, value in pairs:
        builder.append(T0, key, value)
    return builder.build()


def plain(pairs: list[tuple[bytes, bytes]]) -> bytes:
    builder = RecordBatchBuilder()
    for key, value in pairs:
        builder.append(T0, key, value)
    return builder.build()


def batches(log: Log) -> list:
    data = b"".join(segment.read_batch_bytes(0, segment.size) for segment in log.segments)
    return list(iter_batches(data))


def records(log: Log) -> list[Row]:
    """Every data record (read_uncommitted, markers left out)."""
    return [(r.offset, r.key, r.value) for b in batches(log) if not b.header.is_control for r in b.records]


def markers(log: Log) -> list[tuple[int, str, bool]]:
    """(offset, COMMIT/ABORT, carries a delete horizon) of each marker."""
    found = []
    for batch in batches(log):
        if batch.header.is_control:
            control = marker_of(_bytes_of(log, batch.header.base_offset))
            assert control is not None
            kind = "COMMIT" if control.is_commit else "ABORT"
            found.append(
                (batch.header.base_offset, kind, bool(batch.header.attributes & DELETE_HORIZON_FLAG_MASK))
            )
    return found


def _bytes_of(log: Log, offset: int) -> bytes:
    for segment in log.segments:
        for position, header in segment.iter_headers(0):
            if header.base_offset == offset:
                return segment.read_batch_bytes(position, header.size)
    raise AssertionError(f"no batch at {offset}")


def read_committed(log: Log) -> list[Row]:
    """What a read_committed consumer gets: records below the LSO, without those of the aborted
    transactions the log reports for the range (from its .txnindex files), nor markers."""
    lso = log.last_stable_offset
    aborted = log.aborted_transactions(log.log_start_offset, lso)
    data, offset = b"", log.log_start_offset
    while offset < lso:  # a read stops at a segment's end
        chunk = log.read_bytes(offset, 1 << 24, max_offset=lso)
        read = list(iter_batches(chunk))
        if not read:
            break
        data += chunk
        offset = read[-1].header.next_offset
    rows = []
    for batch in iter_batches(data):
        header = batch.header
        if header.is_control or header.base_offset >= lso:
            continue
        if header.is_transactional and any(
            t.producer_id == header.producer_id and t.first_offset <= header.base_offset <= t.last_offset
            for t in aborted
        ):
            continue
        rows.extend((r.offset, r.key, r.value) for r in batch.records)
    return rows


def assert_verifies(manager: LogManager, log: Log) -> None:
    """``kctl log verify`` finds nothing (the cleaner checkpoint written: the gaps are compaction's)."""
    manager.checkpoint()
    report = verify(log.directory)
    assert report.clean, report.findings


def txn_entries(log: Log) -> list[AbortedTxn]:
    return [entry for segment in log.segments for entry in segment.txn_index.entries]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def manager(tmp_path: Path, clock: ManualClock) -> Iterator[LogManager]:
    with LogManager([tmp_path], default_config=CONFIG, clock=clock) as logs:
        yield logs


def transactional_log(manager: LogManager) -> Log:
    """seg 0: 0-1 plain a0 b0, 2-3 producer 1 (aborted) a c, 4 producer 2 (committed) b;
    seg 1: 5 ABORT 1, 6 COMMIT 2, 7 plain b; seg 2: 8 producer 3 (open) d, 9 plain a; seg 3 active."""
    log = manager.get_or_create_log(TP)
    log.append(plain([(b"a", b"a0"), (b"b", b"b0")]))
    log.append(txn(1, [(b"a", b"a-aborted"), (b"c", b"c-aborted")]))
    log.append(txn(2, [(b"b", b"b-committed")]))
    log.roll()
    log.append_control_marker(1, 0, 0, commit=False)
    log.append_control_marker(2, 0, 0, commit=True)
    log.append(plain([(b"b", b"b-new")]))
    log.roll()
    log.append(txn(3, [(b"d", b"d-open")]))
    log.append(plain([(b"a", b"a-late")]))
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 5, 8, 10]
    assert log.last_stable_offset == 8
    return log


def test_aborted_data_goes_markers_stay_then_expire_open_transactions_are_untouched(
    manager: LogManager, clock: ManualClock, tmp_path: Path
) -> None:
    log = transactional_log(manager)
    open_part = [(8, b"d", b"d-open"), (9, b"a", b"a-late")]

    first = clean_log(log, clock)
    # b0 and b-committed superseded, both aborted records gone; the aborted a never hid a0
    assert first.records_removed == 4
    assert records(log) == [(0, b"a", b"a0"), (7, b"b", b"b-new"), *open_part]
    assert markers(log) == [(5, "ABORT", False), (6, "COMMIT", False)]  # their data was there
    assert txn_entries(log) == [AbortedTxn(1, 2, 5, 4)]
    assert_verifies(manager, log)

    clean_log(log, clock)  # no data of either transaction left: removable, a horizon is set
    assert markers(log) == [(5, "ABORT", True), (6, "COMMIT", True)]
    assert txn_entries(log) == [AbortedTxn(1, 2, 5, 4)]  # the ABORT marker is there: so is its entry
    control = batches(log)[1]
    assert control.header.base_timestamp == T0 + RETENTION_MS  # the horizon
    assert [r.timestamp for r in control.records] == [T0]  # the marker keeps its timestamp
    assert_verifies(manager, log)

    clock.advance(RETENTION_MS - 1)
    clean_log(log, clock)
    assert [m[0] for m in markers(log)] == [5, 6]  # delete.retention.ms not over yet
    clock.advance(1)
    clean_log(log, clock)
    assert markers(log) == []
    assert txn_entries(log) == []
    assert records(log) == [(0, b"a", b"a0"), (7, b"b", b"b-new"), *open_part]  # the open txn untouched
    assert log.producer_state.ongoing == {3: 8} and log.last_stable_offset == 8
    assert_verifies(manager, log)


def test_read_committed_is_the_same_before_and_after_cleaning(
    manager: LogManager, clock: ManualClock, tmp_path: Path
) -> None:
    log = manager.get_or_create_log(TP)
    log.append(txn(1, [(b"k1", b"aborted-1"), (b"k2", b"aborted-2")]))  # 0-1
    log.append(plain([(b"k3", b"plain-3")]))  # 2
    log.append(txn(2, [(b"k4", b"committed-4")]))  # 3
    log.append(txn(4, [(b"k7", b"aborted-7")]))  # 4: a second abort, its marker in the next segment
    log.roll()
    log.append_control_marker(1, 0, 0, commit=False)  # 5
    log.append_control_marker(2, 0, 0, commit=True)  # 6
    log.append(plain([(b"k5", b"plain-5")]))  # 7
    log.append_control_marker(4, 0, 0, commit=False)  # 8
    log.roll()
    before = read_committed(log)
    assert before == [(2, b"k3", b"plain-3"), (3, b"k4", b"committed-4"), (7, b"k5", b"plain-5")]
    result = clean_log(log, clock)
    assert result.records_removed == 3
    assert read_committed(log) == before
    assert records(log) == before  # read_uncommitted too: the aborted records are gone
    assert_verifies(manager, log)


def test_producer_state_and_txnindex_rebuilt_from_the_cleaned_log(tmp_path: Path, clock: ManualClock) -> None:
    with LogManager([tmp_path], default_config=CONFIG, clock=clock) as manager:
        log = transactional_log(manager)
        clean_log(log, clock)
        clean_log(log, clock)
        expected = (
            dict(log.producer_state.ongoing),
            log.last_stable_offset,
            txn_entries(log),
            read_committed(log),
        )
    for snapshot in (log.directory).glob("*.snapshot"):
        snapshot.unlink()  # the producer state is rebuilt by replaying the cleaned segments
    with LogManager([tmp_path], default_config=CONFIG, clock=clock) as manager:
        log = manager.get_or_create_log(TP)
        assert (dict(log.producer_state.ongoing), log.last_stable_offset, txn_entries(log)) == expected[:3]
        assert read_committed(log) == expected[3]
        log.append_control_marker(3, 0, 0, commit=True)  # the open transaction commits: now cleanable
        log.roll()
        assert log.last_stable_offset == log.log_end_offset
        clean_log(log, clock)
        assert (8, b"d", b"d-open") in records(log)
        assert (9, b"a", b"a-late") in records(log) and (0, b"a", b"a0") not in records(log)
        assert_verifies(manager, log)

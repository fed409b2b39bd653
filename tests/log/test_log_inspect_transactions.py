"""The offline tools and transactions: ``kctl log dump --deep`` shows a control batch's end-transaction
marker, and ``kctl log verify`` checks each segment's ``.txnindex`` against the ABORT markers in it
(torn entries, entries without their marker, markers without their entry, indexes without a segment)."""

from __future__ import annotations

import struct
from collections.abc import Callable

from kctl.log.inspect import decode_records
from kctl.log.log import Log
from kctl.log.verify import verify
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import parse_header

T0 = 1_700_000_000_000


def txn_batch(producer_id: int) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    builder.append(T0, None, b"v%d" % producer_id)
    return builder.build()


def log_with_abort(open_log: Callable[..., Log]) -> Log:
    log = open_log()
    log.append(txn_batch(1))  # 0
    log.append(txn_batch(2))  # 1
    log.append_control_marker(1, 0, 3, commit=False)  # 2
    log.append_control_marker(2, 0, 3, commit=True)  # 3
    log.close()
    return log


def problems(log: Log) -> list[str]:
    return [finding.problem for finding in verify(log.directory).findings]


def test_dump_shows_the_marker_of_a_control_batch(open_log):
    log = log_with_abort(open_log)
    data = (log.directory / "00000000000000000000.log").read_bytes()
    position, kinds = 0, []
    while position < len(data):
        header = parse_header(data, position)
        [row] = decode_records(data[position : position + header.size])
        kinds.append((row.get("control"), row.get("coordinator_epoch")))
        position += header.size
    assert kinds == [(None, None), (None, None), ("ABORT", 3), ("COMMIT", 3)]


def test_verify_accepts_a_consistent_txn_index(open_log):
    assert problems(log_with_abort(open_log)) == []


def test_verify_finds_a_lost_or_wrong_txn_index(open_log):
    log = log_with_abort(open_log)
    index = log.directory / "00000000000000000000.txnindex"
    entry = index.read_bytes()
    index.unlink()
    [lost] = problems(log)
    assert "ABORT marker of producer 1 at offset 2 is not indexed" in lost
    index.write_bytes(entry + struct.pack(">hqqqq", 0, 2, 1, 3, 4))  # producer 2 committed
    [wrong] = problems(log)
    assert "no ABORT marker of its producer" in wrong
    index.write_bytes(entry + b"\0" * 5)
    [torn] = problems(log)
    assert "torn entry" in torn
    index.write_bytes(entry)
    (log.directory / "00000000000000000099.txnindex").write_bytes(entry)
    assert problems(log) == ["index file without a segment"]

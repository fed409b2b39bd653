"""What a log read says about its region (kctl.log.segment ``read``/``offset_after``): the records a
reader gets whole from the fetch offset on — ``next_offset`` is the offset after the region's last whole
batch — for regions ending at the log end, at a ``max_offset`` (the high watermark), after the first
batch only, or cut by ``max_bytes`` inside a batch; for recent batches (remembered positions) and old
ones (index and headers), checked against the batches' own boundaries, on the same files reopened."""

from __future__ import annotations

import random

from conftest import make_batch

from kctl.log.log import Log
from kctl.log.segment import RECENT_BATCHES


def _boundaries(log: Log) -> list[tuple[int, int, int]]:
    """(start position, end position, next offset) of every batch of the active segment."""
    segment = log.active_segment
    return [(p, p + h.size, h.next_offset) for p, h in segment.iter_headers()]


def _expected(boundaries: list[tuple[int, int, int]], end: int, first_base: int) -> int:
    """The offset after the last batch ending at or before ``end``."""
    done = [next_offset for _, stop, next_offset in boundaries if stop <= end]
    return done[-1] if done else first_base


def _check(log: Log, rng: random.Random) -> None:
    boundaries = _boundaries(log)
    end_offset = log.log_end_offset
    for _ in range(300):
        offset = rng.randrange(end_offset)
        max_bytes = rng.choice([1, 50, 200, 1000, 5000, 1 << 20])
        # a high watermark is a batch boundary: one after the batch holding offset, or none
        max_offset = rng.choice([None, *(nxt for _, _, nxt in boundaries if nxt > offset)])
        region = log.read(offset, max_bytes, max_offset=max_offset)
        assert region is not None
        with region:
            start = region.position
            base = next(iter(log.active_segment.iter_headers(start)))[1].base_offset
            assert region.first_offset == offset
            assert region.next_offset == _expected(boundaries, start + region.size, base), (offset, max_bytes)
            assert region.records_out == max(region.next_offset - offset, 0)
            if max_offset is not None and region.size < max_bytes:
                assert region.next_offset <= max_offset


def test_next_offset_is_the_offset_after_the_last_whole_batch(open_log) -> None:
    log = open_log()
    rng = random.Random(26)
    for _ in range(3 * RECENT_BATCHES):  # the oldest are no longer remembered: index and headers
        log.append(make_batch(rng.randint(1, 6), value_size=rng.choice([10, 40, 300])))
    _check(log, rng)
    log.close()
    reopened = open_log()  # the same files, no position remembered
    assert not reopened.active_segment._recent
    try:
        _check(reopened, rng)
    finally:
        reopened.close()


def test_a_whole_read_counts_every_record_from_the_fetch_offset(open_log) -> None:
    log = open_log()
    for _ in range(4):
        log.append(make_batch(5))
    region = log.read(7, 1 << 20)  # from the middle of the second batch to the end
    assert region is not None
    with region:
        assert (region.first_offset, region.next_offset, region.records_out) == (7, 20, 13)
    region = log.read(7, 1 << 20, max_offset=15)  # the high watermark at a batch boundary
    assert region is not None
    with region:
        assert region.records_out == 8
    region = log.read(7, 1)  # one byte asked: the whole first batch all the same
    assert region is not None
    with region:
        assert (region.next_offset, region.records_out) == (10, 3)
    region = log.read(7, 1, min_one_batch=False)  # a partial batch holds no record whole
    assert region is not None
    with region:
        assert region.records_out == 0

"""The active segment's in-memory positions of the batches it appended last (kctl.log.segment): a read
near the log's end finds its batch without reading a header from the file, answers exactly what the
header scan answers (checked against the same files reopened, where nothing is remembered), and
forgets what a truncation removed."""

from __future__ import annotations

import random

from conftest import make_batch

from kctl.log.files import FileIO
from kctl.log.log import Log
from kctl.log.segment import RECENT_BATCHES


class CountingIO(FileIO):
    def __init__(self) -> None:
        self.preads = 0

    def pread(self, fd: int, size: int, position: int) -> bytes:
        self.preads += 1
        return super().pread(fd, size, position)


def _lookups(log: Log, offsets: list[int]) -> list[object]:
    segment = log.active_segment
    return [segment.translate_offset(offset) for offset in offsets]


def test_recent_batches_are_found_without_reading_the_file(open_log) -> None:
    file_io = CountingIO()
    log = open_log(file_io=file_io)
    rng = random.Random(18)
    for _ in range(3 * RECENT_BATCHES):
        log.append(make_batch(rng.randint(1, 5), value_size=20))
    end = log.log_end_offset
    recent_first = log.active_segment._recent[0][1].base_offset
    file_io.preads = 0
    for offset in range(recent_first, end):
        region = log.read(offset, 1 << 20)
        assert region is not None
        region.release()
    assert file_io.preads == 0
    assert log.active_segment.translate_offset(end) is None
    file_io.preads = 0
    region = log.read(0, 100)  # long before the remembered batches: found through the index and headers
    assert region is not None
    region.release()
    assert file_io.preads > 0


def test_answers_match_the_header_scan_and_truncation_forgets(open_log, clock) -> None:
    log = open_log()
    rng = random.Random(7)
    for _ in range(RECENT_BATCHES + 50):
        log.append(make_batch(rng.randint(1, 4), value_size=10))
    offsets = list(range(log.log_end_offset + 3))
    remembered = _lookups(log, offsets)
    log.truncate_to(log.log_end_offset - 20)
    log.append(make_batch(7, value_size=10))  # different batches where the removed ones were
    after = _lookups(log, offsets)
    log.close()
    reopened = Log(log.directory, log.topic_partition, log.config, clock=clock)
    assert reopened.active_segment._recent == []
    assert _lookups(reopened, offsets) == after
    assert remembered[: log.log_end_offset - 27] == after[: log.log_end_offset - 27]
    reopened.close()

"""The leader epoch cache (KIP-101/KIP-279): assignment, OffsetsForLeaderEpoch answers, truncation from
either end, and its checkpoint file (Kafka's text format, atomic, torn files refused)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kctl.log.files import FileIO, LogStorageError
from kctl.log.leader_epoch import (
    UNDEFINED_EPOCH,
    CorruptLeaderEpochCheckpointError,
    EpochEntry,
    LeaderEpochCache,
    parse_leader_epoch_checkpoint,
    read_leader_epoch_checkpoint,
)
from kctl.log.naming import LEADER_EPOCH_CHECKPOINT

UNDEFINED = (UNDEFINED_EPOCH, -1)


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    tmp_path.mkdir(parents=True, exist_ok=True)
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in entries:
        assert cache.assign(epoch, start)
    return cache


def pairs(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(entry.epoch, entry.start_offset) for entry in cache.entries]


def test_assign_records_only_new_larger_epochs(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    assert cache.latest_epoch == -1
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # the same epoch again: already known
    assert cache.assign(2, 10)
    assert not cache.assign(1, 20)  # stale
    assert not cache.assign(-1, 30)  # a batch without an epoch
    assert cache.latest_epoch == 2
    assert pairs(cache) == [(0, 0), (2, 10)]
    assert read_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) == [
        EpochEntry(0, 0),
        EpochEntry(2, 10),
    ]


def test_assign_replaces_entries_at_or_above_its_start_offset(tmp_path, caplog):
    # an epoch recorded for an append that then failed, or a leader change before anything was
    # appended: the next epoch starts at the same offset
    cache = cache_with(tmp_path, (0, 0), (1, 10))
    caplog.set_level("DEBUG", logger="kctl.log")
    assert cache.assign(2, 10)
    assert pairs(cache) == [(0, 0), (2, 10)]
    # routine (each quick leader change does it on every replica): DEBUG, not WARNING
    assert [(r.levelname, "replaces entries" in r.getMessage()) for r in caplog.records] == [("DEBUG", True)]


def test_end_offset_for_every_case(tmp_path):
    empty = LeaderEpochCache(tmp_path / "empty")
    assert empty.end_offset_for(0, 100) == UNDEFINED  # nothing known
    cache = cache_with(tmp_path, (2, 10), (4, 30), (7, 50))
    log_end = 80
    assert cache.end_offset_for(UNDEFINED_EPOCH, log_end) == UNDEFINED
    # a known epoch ends where the next larger one starts
    assert cache.end_offset_for(2, log_end) == (2, 30)
    assert cache.end_offset_for(4, log_end) == (4, 50)
    # the latest epoch ends at the log end offset
    assert cache.end_offset_for(7, log_end) == (7, 80)
    # unknown, between two known: answered for the largest known epoch below it
    assert cache.end_offset_for(3, log_end) == (2, 30)
    assert cache.end_offset_for(5, log_end) == (4, 50)
    assert cache.end_offset_for(6, log_end) == (4, 50)
    # below every known epoch (its entries went with retention): the requested epoch, ending where the
    # first known epoch starts — Kafka's answer, not UNDEFINED
    assert cache.end_offset_for(0, log_end) == (0, 10)
    assert cache.end_offset_for(1, log_end) == (1, 10)
    # above the latest: UNDEFINED
    assert cache.end_offset_for(8, log_end) == UNDEFINED


def test_truncate_from_end_drops_entries_at_or_after_the_offset(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 20))
    assert not cache.truncate_from_end(25)  # nothing starts at or after 25
    assert cache.truncate_from_end(20)
    assert pairs(cache) == [(0, 0), (1, 10)]
    assert cache.truncate_from_end(5)
    assert pairs(cache) == [(0, 0)]
    assert read_leader_epoch_checkpoint(cache.path) == [EpochEntry(0, 0)]
    assert cache.truncate_from_end(0)
    assert pairs(cache) == []
    assert not cache.path.exists()  # an empty cache keeps no file


def test_truncate_from_start_keeps_the_covering_entry_moved_up(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (1, 10), (2, 20))
    assert cache.truncate_from_start(15)
    assert pairs(cache) == [(1, 15), (2, 20)]
    assert not cache.truncate_from_start(15)  # already there
    assert cache.truncate_from_start(20)  # an entry starting exactly there is kept as it is
    assert pairs(cache) == [(2, 20)]
    assert cache.truncate_from_start(35)
    assert pairs(cache) == [(2, 35)]
    assert read_leader_epoch_checkpoint(cache.path) == [EpochEntry(2, 35)]
    below = cache_with(tmp_path / "below", (3, 50))
    assert not below.truncate_from_start(40)  # below the first entry: nothing to do
    assert pairs(below) == [(3, 50)]


def test_checkpoint_round_trip_in_kafkas_format(tmp_path):
    cache_with(tmp_path, (0, 0), (3, 120), (5, 4000))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n0 0\n3 120\n5 4000\n"
    reloaded = LeaderEpochCache(tmp_path)
    assert reloaded.load()
    assert pairs(reloaded) == [(0, 0), (3, 120), (5, 4000)]
    assert not any(name.endswith(".tmp") for name in os.listdir(tmp_path))


@pytest.mark.parametrize(
    "text",
    [
        "",  # torn before anything reached the disk
        "0\n",  # torn after the version line
        "0\n3\n0 0\n3 1",  # torn inside the entries: count disagrees
        "1\n1\n0 0\n",  # another version
        "0\nx\n",
        "0\n1\n0\n",
        "0\n2\n3 10\n2 20\n",  # epochs going down
        "0\n2\n2 20\n3 10\n",  # start offsets going down
        "0\n1\n-1 0\n",
    ],
)
def test_torn_or_damaged_checkpoint_is_refused(tmp_path, text):
    with pytest.raises(CorruptLeaderEpochCheckpointError):
        parse_leader_epoch_checkpoint(text)
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(text)
    cache = LeaderEpochCache(tmp_path)
    assert not cache.load()
    assert pairs(cache) == []


def test_binary_garbage_is_refused(tmp_path):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CorruptLeaderEpochCheckpointError):
        read_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT)


class FailingRename(FileIO):
    def rename(self, source: Path, target: Path) -> None:
        raise OSError(28, "No space left on device")


def test_a_failed_write_raises_and_leaves_the_old_file(tmp_path):
    cache_with(tmp_path, (0, 0))
    failing = LeaderEpochCache(tmp_path, FailingRename())
    assert failing.load()
    with pytest.raises(LogStorageError):
        failing.assign(1, 10)
    assert read_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(0, 0)]
    assert sorted(os.listdir(tmp_path)) == [LEADER_EPOCH_CHECKPOINT]  # no temporary file left


def test_epoch_for_offset(tmp_path):
    cache = cache_with(tmp_path, (1, 10), (4, 30))
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 29, 30, 99)] == [-1, -1, 1, 1, 4, 4]

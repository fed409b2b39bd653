"""Producer id allocation for InitProducerId: ids unique across brokers (the broker id in the high bits)
and across restarts (blocks of ids reserved in ``<log.dir>/producer-id-block`` before they are used).

The file is versioned text written atomically (temporary file, fsync, rename, fsync of the
directory), like the offset checkpoints::

    1              the version
    <broker id>    the broker whose ids it reserves
    <block end>    every id below this (in the broker's range) may have been handed out

A file of one number (kctl before the version line) is read as the block end. A file that does not
parse, or that names another broker, stops the broker with `CorruptProducerIdBlockError`: starting
again from 0 could hand a new producer the id of one still writing, so its batches would be taken
for duplicates or out of sequence."""

from __future__ import annotations

import threading
from pathlib import Path

from kctl.common.atomic_file import replace_file
from kctl.log.manager import InconsistentMetadataError
from kctl.log.naming import PRODUCER_ID_BLOCK

BLOCK_SIZE = 1000
BROKER_SHIFT = 40  # ids of broker b are b * 2**40 + n
PRODUCER_ID_BLOCK_VERSION = 1


class CorruptProducerIdBlockError(InconsistentMetadataError):
    """The producer-id-block file does not parse or belongs to another broker."""


def read_block_end(path: Path, broker_id: int) -> int:
    """The block end recorded in ``path`` (0 when the file does not exist)."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return 0
    except (UnicodeDecodeError, OSError) as error:
        raise _corrupt(path, f"cannot be read ({error})") from None
    lines = text.split()
    try:
        if len(lines) == 1:  # kctl's format before the version line
            block_end = int(lines[0])
        elif len(lines) == 3 and int(lines[0]) == PRODUCER_ID_BLOCK_VERSION:
            owner, block_end = int(lines[1]), int(lines[2])
            if owner != broker_id:
                raise _corrupt(path, f"reserves the ids of broker {owner}, not of broker {broker_id}")
        else:
            raise ValueError(text[:40])
    except ValueError:
        raise _corrupt(path, f"does not parse: {text[:40]!r}") from None
    if not 0 <= block_end < 1 << BROKER_SHIFT:
        raise _corrupt(path, f"holds a block end out of range: {block_end}")
    return block_end


def write_block_end(path: Path, broker_id: int, block_end: int) -> None:
    replace_file(path, f"{PRODUCER_ID_BLOCK_VERSION}\n{broker_id}\n{block_end}\n".encode("ascii"))


def _corrupt(path: Path, what: str) -> CorruptProducerIdBlockError:
    return CorruptProducerIdBlockError(
        f"{path} {what}: the broker will not start, because allocating producer ids again from 0 "
        "could give a new producer the id of one still writing. Write the next free id (a number "
        "larger than any producer id this broker handed out, less the broker's base "
        f"broker_id * 2**{BROKER_SHIFT}) on its own line into the file, or remove it to start "
        "again from 0 knowingly"
    )


class ProducerIdManager:
    """Hands out this broker's producer ids, reserving ``BLOCK_SIZE`` at a time on disk first."""

    def __init__(self, broker_id: int, directory: Path) -> None:
        self._path = directory / PRODUCER_ID_BLOCK
        self._broker_id = broker_id
        self._base = broker_id << BROKER_SHIFT
        self._lock = threading.Lock()
        self._next = read_block_end(self._path, broker_id)
        self._block_end = self._next  # nothing reserved yet in this run

    def _reserve(self) -> None:
        self._block_end = self._next + BLOCK_SIZE
        write_block_end(self._path, self._broker_id, self._block_end)

    def next_id(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                self._reserve()
            producer_id = self._base + self._next
            self._next += 1
            return producer_id

"""Producer id allocation for InitProducerId: ids unique across brokers (the broker id in the high bits)
and across restarts (blocks of ids reserved in ``<log.dir>/producer-id-block`` before they are used)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

BLOCK_SIZE = 1000
BROKER_SHIFT = 40  # ids of broker b are b * 2**40 + n


class ProducerIdManager:
    def __init__(self, broker_id: int, directory: Path) -> None:
        self._path = directory / "producer-id-block"
        self._base = broker_id << BROKER_SHIFT
        self._lock = threading.Lock()
        try:
            self._next = int(self._path.read_text().strip())
        except (FileNotFoundError, ValueError):
            self._next = 0
        self._block_end = self._next  # nothing reserved yet in this run

    def _reserve(self) -> None:
        self._block_end = self._next + BLOCK_SIZE
        temporary = self._path.with_name(self._path.name + ".tmp")
        with open(temporary, "w") as handle:
            handle.write(f"{self._block_end}\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._path)

    def next_id(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                self._reserve()
            producer_id = self._base + self._next
            self._next += 1
            return producer_id

"""Recovery of a partition's segments after an unclean stop, and the plan behind it.

A batch is valid when its header parses, its length fits in the file, its CRC-32C matches and its
offsets rise above the previous batch's. Recovery keeps the valid prefix of the first damaged segment,
cuts the rest, and drops every later segment. The plan is computed read-only, so ``kctl log recover
--dry-run`` and ``kctl log verify`` report exactly what the broker's recovery would do."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kctl.log.files import DEFAULT_FILE_IO, FileIO
from kctl.log.segment import ScanResult, scan_file

KEEP = "keep"
TRUNCATE = "truncate"
DELETE = "delete"


@dataclass(frozen=True)
class SegmentRecovery:
    """What recovery does to one segment."""

    base_offset: int
    path: Path
    size: int
    action: str  # keep | truncate | delete
    scan: ScanResult | None  # None for segments deleted because an earlier one was damaged
    reason: str | None

    @property
    def valid_bytes(self) -> int:
        if self.action == DELETE:
            return 0
        return self.scan.valid_bytes if self.scan else self.size

    @property
    def cut_bytes(self) -> int:
        return self.size - self.valid_bytes


def scan_path(path: Path, base_offset: int, file_io: FileIO = DEFAULT_FILE_IO) -> ScanResult:
    """Validate a segment file without modifying it."""
    fd = file_io.open(path, os.O_RDONLY)
    try:
        return scan_file(fd, file_io.size(fd), base_offset, file_io)
    finally:
        file_io.close(fd)


def plan_recovery(
    segments: Sequence[tuple[int, Path]], file_io: FileIO = DEFAULT_FILE_IO
) -> list[SegmentRecovery]:
    """Scan ``segments`` ((base_offset, path) in offset order) and decide what recovery keeps."""
    plan: list[SegmentRecovery] = []
    damaged_at: int | None = None
    previous_last_offset: int | None = None
    for base_offset, path in segments:
        size = path.stat().st_size
        if damaged_at is not None:
            plan.append(
                SegmentRecovery(
                    base_offset, path, size, DELETE, None, f"follows damage at offset {damaged_at}"
                )
            )
            continue
        scan = scan_path(path, base_offset, file_io)
        if previous_last_offset is not None and base_offset <= previous_last_offset:
            damaged_at = base_offset
            plan.append(
                SegmentRecovery(
                    base_offset,
                    path,
                    size,
                    DELETE,
                    scan,
                    f"segment base offset {base_offset} overlaps the previous segment "
                    f"(last offset {previous_last_offset})",
                )
            )
            continue
        if scan.error is None:
            plan.append(SegmentRecovery(base_offset, path, size, KEEP, scan, None))
        else:
            damaged_at = scan.last_offset + 1 if scan.last_offset is not None else base_offset
            plan.append(SegmentRecovery(base_offset, path, size, TRUNCATE, scan, scan.error))
        if scan.last_offset is not None:
            previous_last_offset = scan.last_offset
    return plan

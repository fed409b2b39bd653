"""Moving a partition's log to another of the broker's log directories (AlterReplicaLogDirs), as
files: the state of one move and the copying.

A move fills a *future* directory, ``<dest log dir>/<topic>_<partition>.<id>-future``, while the
partition keeps serving from its current directory: first a bulk copy of every file (no lock; the
segments are append-only, so a later pass copies only what was appended to a ``.log`` file since),
then, with the log closed (``LogManager.complete_move``), a last pass copies what changed, the future
directory is fsynced and renamed to ``<dest log dir>/<topic>_<partition>``, the log reopened there,
and the old directory deleted. A future directory left by a crash is deleted when the log
directories are loaded (the move is simply not done); a crash between the rename and the deletion
leaves two identical copies, of which loading keeps one."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kctl.common.topic_partition import TopicPartition
from kctl.log.naming import LOG_SUFFIX

_CHUNK = 1024 * 1024
_TAIL_CHECK = 4096  # bytes of an appended-to file compared before copying only what follows them


class LogDirNotFoundError(ValueError):
    """The destination is not one of the broker's log directories."""


@dataclass
class LogMove:
    """One partition's move in progress."""

    topic_partition: TopicPartition
    source: Path  # the partition's current directory
    destination: Path  # the log directory it moves to
    future: Path  # the future directory being filled
    #: file name -> (inode, bytes copied) of what the future directory holds
    copied: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the log end offset the last completed copy pass started at (-1: none finished)
    copied_end_offset: int = -1

    @property
    def copied_bytes(self) -> int:
        return sum(size for _, size in self.copied.values())


def _same_tail(source: Path, target: Path, length: int) -> bool:
    """Whether the ``_TAIL_CHECK`` bytes before ``length`` are the same in both files (an
    append-only file truncated and appended again would differ there)."""
    start = max(0, length - _TAIL_CHECK)
    with open(source, "rb") as a, open(target, "rb") as b:
        a.seek(start)
        b.seek(start)
        return a.read(length - start) == b.read(length - start)


def _append_rest(source: Path, target: Path, offset: int) -> int:
    """Copy ``source[offset:]`` to the end of ``target`` (truncated to ``offset`` first)."""
    copied = offset
    with open(source, "rb") as src, open(target, "r+b") as dst:
        dst.truncate(offset)
        src.seek(offset)
        dst.seek(offset)
        while chunk := src.read(_CHUNK):
            dst.write(chunk)
            copied += len(chunk)
    return copied


def sync_files(move: LogMove) -> None:
    """One copy pass from the partition's directory to the future one: a ``.log`` file still being
    appended to gets only its new bytes, other new or changed files are copied whole, files gone
    from the source are removed."""
    present = set()
    for entry in os.scandir(move.source):
        if not entry.is_file(follow_symlinks=False):
            continue
        name = entry.name
        present.add(name)
        stat = entry.stat(follow_symlinks=False)
        target = move.future / name
        known = move.copied.get(name)
        if (
            known is not None
            and name.endswith(LOG_SUFFIX)
            and known[0] == stat.st_ino
            and stat.st_size >= known[1]
            and target.exists()
            and _same_tail(Path(entry.path), target, known[1])
        ):
            if stat.st_size > known[1]:
                move.copied[name] = (stat.st_ino, _append_rest(Path(entry.path), target, known[1]))
            continue
        shutil.copyfile(entry.path, target)
        move.copied[name] = (stat.st_ino, target.stat().st_size)
    for name in set(move.copied) - present:
        (move.future / name).unlink(missing_ok=True)
        del move.copied[name]


def fsync_tree(directory: Path) -> None:
    """fsync every file of ``directory`` and the directory itself."""
    for entry in os.scandir(directory):
        if entry.is_file(follow_symlinks=False):
            fd = os.open(entry.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fsync_directory(directory)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

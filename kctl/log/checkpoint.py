"""Offset checkpoint files (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` (high watermarks), ``cleaner-offset-checkpoint``): versioned text,
written atomically (temp file, fsync, rename).

Format (Kafka's): a version line (``0``), a count line, then one ``<topic> <partition> <offset>`` line
per partition."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kctl.common.atomic_file import replace_file
from kctl.common.topic_partition import TopicPartition

CHECKPOINT_VERSION = 0


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not parse."""


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    replace_file(path, ("\n".join(lines) + "\n").encode("ascii"))


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets in ``path``; an empty mapping when the file does not exist."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as error:
        raise CorruptCheckpointError(f"{path}: not ASCII text") from error
    lines = text.splitlines()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(f"{path}: unsupported version {lines[0].strip()!r}")
    try:
        count = int(lines[1])
    except ValueError as error:
        raise CorruptCheckpointError(f"{path}: bad count line {lines[1]!r}") from error
    entries = lines[2:]
    if len(entries) != count:
        raise CorruptCheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    result: dict[TopicPartition, int] = {}
    for line in entries:
        parts = line.split()
        if len(parts) != 3:
            raise CorruptCheckpointError(f"{path}: malformed entry {line!r}")
        try:
            result[TopicPartition(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError as error:
            raise CorruptCheckpointError(f"{path}: malformed entry {line!r}") from error
    return result

"""Replacing a small file atomically and durably: what checkpoints, the producer-id block and the
embedded registry's documents are written with.

The bytes go to ``<name>.tmp`` next to the file, which is fsynced, renamed over the file and then
the directory fsynced: a reader, or a restart after a crash, finds the old content or the new one,
never a mixture, and once the call returns the new content survives a power loss."""

from __future__ import annotations

import os
from pathlib import Path


def replace_file(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path``'s content with ``data`` atomically; with ``fsync`` (the default) also durably
    (the file and its directory fsynced). Without it only atomically, for tests that need no
    durability."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        if fsync:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(temporary, path)
    if fsync:
        directory_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)

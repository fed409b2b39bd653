"""replace_file (kctl/common/atomic_file.py): the new content replaces the old whole, through a
temporary file that does not stay behind, fsynced (file and directory) unless told not to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kctl.common.atomic_file import replace_file


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_the_file_is_replaced_and_synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state"
    path.write_bytes(b"old content, longer than the new one\n")
    synced = _fsyncs(monkeypatch)
    replace_file(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    assert synced == ["file", "dir"]


def test_without_fsync_nothing_is_synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state"
    synced = _fsyncs(monkeypatch)
    replace_file(path, b"first\n", fsync=False)
    assert path.read_bytes() == b"first\n" and synced == []


def test_a_failed_write_leaves_the_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state"
    path.write_bytes(b"old\n")

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError):
        replace_file(path, b"new\n")
    assert path.read_bytes() == b"old\n"

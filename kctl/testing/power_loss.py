"""Power loss of one broker (issue 24's lost-page-cache nemesis): every byte its log wrote since the
last fsync of each file is gone, as after a power cut, while the other brokers keep theirs.

A broker run as ``python -m kctl.testing.power_loss broker start ...`` (`power_loss_broker` makes a
`BrokerProcess` do so) is kctl's own broker with the log's file layer (`kctl.log.files.FileIO`, the
seam every log, index and snapshot write goes through) wrapped: each file's durable length is
appended to a ledger file (``KCTL_POWER_LOSS_LEDGER``) when it becomes known — the size of a file
that existed when first opened, 0 for a file it creates, the size at each fsync, the smaller size
after a truncation — and renames and removals move or drop the entry. After the broker is killed
with SIGKILL, `apply_power_loss(ledger)` cuts every file back to its last durable length (a file
created and never synced is left empty) and returns the bytes each lost; restarting the broker then
finds what a machine that lost power would. Checkpoint files written with their own fsync (the
recovery point, the high watermark, the leader epochs) are durable as they are.

Simplifications, each on the side of more durability than a real disk gives: a rename or removal
is durable at once (no directory fsync needed), and a file's prefix up to its durable length is
intact (no torn pages)."""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
from pathlib import Path
from typing import Any

from kctl.localcluster import BrokerProcess
from kctl.log.files import FileIO

LEDGER_ENV = "KCTL_POWER_LOSS_LEDGER"
MODULE = "kctl.testing.power_loss"


class _Ledger:
    """The running broker's side: appends durability events, one JSON line each."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self.paths: dict[int, str] = {}  # open fd -> path

    def note(self, *event: Any) -> None:
        line = (json.dumps(event) + "\n").encode()
        with self._lock:
            os.write(self._fd, line)


def install(ledger_path: Path) -> None:
    """Wrap `FileIO`'s calls (the class itself: every instance, the default one included) so that
    they record durable lengths in ``ledger_path``."""
    ledger = _Ledger(ledger_path)
    original_open, original_fsync = FileIO.open, FileIO.fsync
    original_ftruncate, original_close = FileIO.ftruncate, FileIO.close
    original_rename, original_remove = FileIO.rename, FileIO.remove

    def open_(self: FileIO, path: Path, flags: int, mode: int = 0o644) -> int:
        existed = os.path.exists(path)
        fd = original_open(self, path, flags, mode)
        ledger.paths[fd] = str(path)
        ledger.note("open", str(path), os.fstat(fd).st_size if existed else 0)
        return fd

    def fsync(self: FileIO, fd: int) -> None:
        original_fsync(self, fd)
        if fd in ledger.paths:
            ledger.note("durable", ledger.paths[fd], os.fstat(fd).st_size)

    def ftruncate(self: FileIO, fd: int, size: int) -> None:
        original_ftruncate(self, fd, size)
        if fd in ledger.paths:
            ledger.note("truncate", ledger.paths[fd], size)

    def close(self: FileIO, fd: int) -> None:
        ledger.paths.pop(fd, None)
        original_close(self, fd)

    def rename(self: FileIO, source: Path, target: Path) -> None:
        original_rename(self, source, target)
        ledger.note("rename", str(source), str(target))

    def remove(self: FileIO, path: Path) -> None:
        original_remove(self, path)
        ledger.note("remove", str(path))

    FileIO.open = open_  # type: ignore[method-assign]
    FileIO.fsync = fsync  # type: ignore[method-assign]
    FileIO.ftruncate = ftruncate  # type: ignore[method-assign]
    FileIO.close = close  # type: ignore[method-assign]
    FileIO.rename = rename  # type: ignore[method-assign]
    FileIO.remove = remove  # type: ignore[method-assign]


def durable_lengths(ledger_path: Path) -> dict[str, int]:
    """Each file's durable length, replaying the ledger."""
    durable: dict[str, int] = {}
    for line in ledger_path.read_text().splitlines():
        try:
            kind, *args = json.loads(line)
        except ValueError:
            continue  # a line cut by the kill
        if kind == "open":
            durable.setdefault(args[0], args[1])
        elif kind == "durable":
            durable[args[0]] = args[1]
        elif kind == "truncate" and args[0] in durable:
            durable[args[0]] = min(durable[args[0]], args[1])
        elif kind == "rename" and args[0] in durable:
            durable[args[1]] = durable.pop(args[0])
        elif kind == "remove":
            durable.pop(args[0], None)
    return durable


def apply_power_loss(ledger_path: Path) -> dict[str, int]:
    """Cut every file the ledger knows back to its durable length (the broker must be dead);
    returns the bytes dropped, by path (files that lost nothing left out). The ledger then starts
    afresh: what is on disk now is durable."""
    dropped: dict[str, int] = {}
    for path, length in durable_lengths(ledger_path).items():
        try:
            size = os.path.getsize(path)
        except OSError:
            continue
        if size > length:
            os.truncate(path, length)
            dropped[path] = size - length
    ledger_path.unlink()
    return dropped


def power_loss_broker(broker: BrokerProcess, ledger_path: Path) -> BrokerProcess:
    """Make ``broker`` (not started) run under this module, recording to ``ledger_path``."""
    broker.module = MODULE
    broker.env[LEDGER_ENV] = str(ledger_path)
    return broker


def lose_power(broker: BrokerProcess) -> str:
    """A fault: SIGKILL ``broker`` (run by `power_loss_broker`), drop what it had not synced, start
    it again on what is left."""
    ledger = Path(broker.env[LEDGER_ENV])
    broker.kill()
    dropped = apply_power_loss(ledger)
    broker.start()
    return f"power loss of broker {broker.broker_id}: {sum(dropped.values())} bytes in {len(dropped)} files"


def main() -> None:
    """``python -m kctl.testing.power_loss ARGS``: ``kctl ARGS`` with the ledger installed (and the
    disk faults of kctl.testing.disk_faults and the clock of kctl.testing.clock_skew too when their
    control files are set)."""
    install(Path(os.environ[LEDGER_ENV]))
    from kctl.testing import disk_faults

    if disk_faults.CONTROL_ENV in os.environ:
        disk_faults.install(Path(os.environ[disk_faults.CONTROL_ENV]))
    from kctl.testing import clock_skew

    clock_skew.install_from_environment()
    sys.argv[0] = "kctl"
    runpy.run_module("kctl", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

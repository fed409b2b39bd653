"""Slow and failing disks (issue 24's disk nemesis) for one broker process, switched on and off while
it runs.

A broker run as ``python -m kctl.testing.disk_faults broker start ...`` (`faulty_disk_broker` makes a
`BrokerProcess` do so) is kctl's own broker with the log's file layer (`kctl.log.files.FileIO`)
wrapped: before every write and fsync (and, for the EIO faults, every open) it looks at a control
file (``KCTL_DISK_FAULTS``; re-read only when its modification time changes) and then

- ``""`` (or no file): does nothing more;
- ``"slow MS"``: sleeps MS milliseconds first, as a disk whose writes and syncs stall (the broker's
  event loop stalls with it, as it would on a real slow disk);
- ``"eio"``: fails with EIO, as a dying disk does;
- ``"eio DIR"``: fails with EIO for the files under the directory DIR only (one log dir of several
  failing: the broker takes that dir offline and goes on with the others, KIP-112).

`set_disk_fault` writes the control file; the faults `fail_disk` and `slow_disk` use it under a
`kctl.testing.jepsen.Campaign`."""

from __future__ import annotations

import errno
import os
import runpy
import sys
import time
from pathlib import Path

from kctl.localcluster import BrokerProcess
from kctl.log.files import FileIO

CONTROL_ENV = "KCTL_DISK_FAULTS"
MODULE = "kctl.testing.disk_faults"
HALT_TIMEOUT_S = 30.0


class _Control:
    """The fault the control file names, re-read when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: int | None = None
        self.mode = ""
        self.delay_s = 0.0
        self.failing_dir: str | None = None

    def check(self, path: str | None = None, *, delay: bool = True) -> None:
        try:
            stamp = os.stat(self.path).st_mtime_ns
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            words = self.path.read_text().split() if stamp is not None else []
            self.mode = words[0] if words else ""
            self.delay_s = float(words[1]) / 1000 if self.mode == "slow" and len(words) > 1 else 0.0
            self.failing_dir = words[1].rstrip("/") + "/" if self.mode == "eio" and len(words) > 1 else None
        if self.mode == "eio" and (self.failing_dir is None or (path or "").startswith(self.failing_dir)):
            raise OSError(errno.EIO, "Input/output error (injected by kctl.testing.disk_faults)")
        if self.delay_s and delay:
            time.sleep(self.delay_s)


def install(control_path: Path) -> None:
    """Wrap `FileIO`'s open, write and fsync (the class itself: every instance) with the control's
    faults; open also records which file each descriptor is (for ``"eio DIR"``)."""
    control = _Control(control_path)
    original_open, original_write, original_fsync = FileIO.open, FileIO.write, FileIO.fsync
    paths: dict[int, str] = {}

    def open_(self: FileIO, path: Path, flags: int, mode: int = 0o644) -> int:
        absolute = os.path.abspath(path)
        control.check(absolute, delay=False)  # a failing disk fails opens too (a dir failing at start)
        fd = original_open(self, path, flags, mode)
        paths[fd] = absolute
        return fd

    def write(self: FileIO, fd: int, data: bytes | bytearray | memoryview) -> int:
        control.check(paths.get(fd))
        return original_write(self, fd, data)

    def fsync(self: FileIO, fd: int) -> None:
        control.check(paths.get(fd))
        original_fsync(self, fd)

    FileIO.open = open_  # type: ignore[method-assign]
    FileIO.write = write  # type: ignore[method-assign]
    FileIO.fsync = fsync  # type: ignore[method-assign]


def faulty_disk_broker(broker: BrokerProcess, control_path: Path) -> BrokerProcess:
    """Make ``broker`` (not started) run under this module, its disk driven by ``control_path``
    (under kctl.testing.power_loss when the broker is set up for power losses too: that module
    installs both)."""
    if broker.module == "kctl":
        broker.module = MODULE
    broker.env[CONTROL_ENV] = str(control_path)
    return broker


def set_disk_fault(broker: BrokerProcess, fault: str) -> None:
    """``""``, ``"slow MS"``, ``"eio"`` or ``"eio DIR"`` (see the module docstring), replaced
    atomically."""
    control = Path(broker.env[CONTROL_ENV])
    temporary = control.with_name(control.name + ".tmp")
    temporary.write_text(fault)
    os.replace(temporary, control)


def fail_disk(broker: BrokerProcess) -> str:
    """A fault: ``broker``'s disk starts failing with EIO; the broker halts at its next write (Kafka
    halts when its last log dir fails); then the disk is mended and the broker started again."""
    set_disk_fault(broker, "eio")
    try:
        deadline = time.monotonic() + HALT_TIMEOUT_S
        while broker.running:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"broker {broker.broker_id} did not halt within {HALT_TIMEOUT_S:g} s of EIO"
                )
            time.sleep(0.05)  # polling interval, bounded by the deadline
        status = broker.process.returncode if broker.process is not None else None
    finally:
        set_disk_fault(broker, "")
    broker.start()
    return f"disk of broker {broker.broker_id} failed (EIO): halted with status {status}, restarted"


def slow_disk(broker: BrokerProcess, delay_ms: int, hold_s: float) -> str:
    """A fault: ``broker``'s writes and fsyncs stall ``delay_ms`` each for ``hold_s`` seconds (the
    fault's length, not a wait for a condition)."""
    set_disk_fault(broker, f"slow {delay_ms}")
    try:
        time.sleep(hold_s)
    finally:
        set_disk_fault(broker, "")
    return f"disk of broker {broker.broker_id} slow ({delay_ms} ms a write) for {hold_s:g} s"


def main() -> None:
    """``python -m kctl.testing.disk_faults ARGS``: ``kctl ARGS`` on a disk the control file drives."""
    install(Path(os.environ[CONTROL_ENV]))
    from kctl.testing import clock_skew

    clock_skew.install_from_environment()
    sys.argv[0] = "kctl"
    runpy.run_module("kctl", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

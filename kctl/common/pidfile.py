"""Pid files that cannot be fooled by a reused pid.

A pid file outlives its process when the process is killed (SIGKILL, power loss). Linux hands pids out
again (``kernel.pid_max`` is 32768 on many machines, so a busy machine cycles through them in minutes),
and a stale file's pid may by then belong to another process — even another ``kctl broker start``. A
pid file's pid is taken as its writer only when that process runs (not a zombie) and **started no
later than the file was last written**: a process that reused the pid started after the file was
written. Start times come from ``/proc/<pid>/stat`` (field 22, clock ticks since boot) and the boot
time in ``/proc/stat``; the file's time is its mtime.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

START_TIME_SLACK_S = 1.0
"""Tolerance of the comparison: the boot time in /proc/stat is in whole seconds."""


def command_line(pid: int) -> str | None:
    """The command line of a live (not zombie) ``pid``, its arguments joined by blanks; None when it
    does not run (our own exited children are reaped on the way)."""
    if pid <= 0:
        return None
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
        return None
    return cmdline


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def process_start_time(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch), None when it does not run or /proc says nothing."""
    boot = _boot_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of the line; fields[0] is field 3 (the state)
    except (OSError, ValueError, IndexError):
        return None
    if boot is None:
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def read_pid_file(path: Path) -> int | None:
    """The pid in ``path``, None when there is no such file or no pid in it."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def pid_file_owner(path: Path, mark: str = "") -> int | None:
    """The pid in ``path`` when that process still runs, its command line contains ``mark``, and it
    started no later than the file was written (so it is the writer, not a process that reused the
    pid); None otherwise."""
    pid = read_pid_file(path)
    if pid is None or pid == os.getpid():
        return None
    cmdline = command_line(pid)
    if cmdline is None or mark not in cmdline:
        return None
    started = process_start_time(pid)
    try:
        written = path.stat().st_mtime
    except OSError:
        return None
    if started is not None and started > written + START_TIME_SLACK_S:
        return None  # the pid was reused after the file was written
    return pid

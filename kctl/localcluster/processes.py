"""Which processes of a local cluster actually run, whoever started them: by what runs, not by the
pids ``kctl cluster up`` recorded (a broker restarted by hand with ``kctl broker start`` has a pid of
its own).

A broker is found through its log dir, first of:

1. the process holding the log dir's lock (the ``flock`` on ``<log dir>/.lock`` every running broker
   holds, read from ``/proc/locks``): this is the broker, however it was started;
2. the pid in ``<log dir>/kctl-broker.pid``, written by ``kctl broker start`` (foreground and
   ``--daemon``) before it takes the lock and removed after it released it, when that pid runs a
   ``kctl broker start`` that started before the file was written (``kctl.common.pidfile``: a killed
   broker's file may name a pid reused since, even by another broker);
3. the pid recorded in cluster.json, when it still runs a ``kctl broker start`` naming that log dir.

A ZooKeeper server is its recorded pid when that still runs ZooKeeper's main class (standalone or
quorum) with the server's ``zoo.cfg``. A pid is alive when ``/proc/<pid>`` exists and is not a
zombie (our own exited children are reaped on the way). ``kafka_answers(host, port)`` asks an
address whether a Kafka broker answers there: what ``kctl cluster down`` checks after stopping
every broker it found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import time
from pathlib import Path

from kctl.common.pidfile import command_line, pid_file_owner

ZOOKEEPER_MARK = "org.apache.zookeeper.server."  # standalone or quorum main class
BROKER_MARK = "kctl broker start"
LOCK_FILE = ".lock"  # kctl.log.manager.LOCK_FILE (this layer may not import kctl.log)
PID_FILE = "kctl-broker.pid"  # what `kctl broker start` writes in its first log dir
POLL_S = 0.05  # polling interval of the waits below, each bounded by its deadline


def process_alive(pid: int, mark: str = "") -> bool:
    """Whether ``pid`` runs (not a zombie) and its command line contains ``mark`` (guards against a
    pid reused by another program)."""
    cmdline = command_line(pid)
    return cmdline is not None and mark in cmdline


def lock_holders(path: Path) -> list[int]:
    """The pids holding a lock (``flock`` or POSIX) on the file ``path``, from ``/proc/locks``."""
    try:
        st = path.stat()
        table = Path("/proc/locks").read_text()
    except OSError:
        return []
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 10782 fe:00:9982482 0 EOF"; waiters have "->" after the number
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == wanted:
            with contextlib.suppress(ValueError):
                pids.append(int(fields[4]))
    return pids


def broker_pid(log_dir: Path, recorded: int = -1) -> int | None:
    """The pid of the broker running on ``log_dir`` (see the module docstring), None when none runs."""
    for pid in lock_holders(log_dir / LOCK_FILE):
        if process_alive(pid, BROKER_MARK):  # not another tool holding the lock (`kctl log ...`)
            return pid
    from_file = pid_file_owner(log_dir / PID_FILE, BROKER_MARK)  # not a pid reused since
    if from_file is not None:
        return from_file
    cmdline = command_line(recorded)
    if cmdline is not None and BROKER_MARK in cmdline and str(log_dir) in cmdline:
        return recorded
    return None


def zookeeper_pid(config_file: Path, recorded: int) -> int | None:
    """The recorded ZooKeeper pid when it still runs ZooKeeper with ``config_file``, else None."""
    cmdline = command_line(recorded)
    if cmdline is not None and ZOOKEEPER_MARK in cmdline and str(config_file) in cmdline:
        return recorded
    return None


PROBE_CORRELATION_ID = 0x6B63746C  # "kctl"


def kafka_answers(host: str, port: int, timeout: float = 2.0) -> bool:
    """Whether a Kafka broker answers on ``host:port``: an ApiVersions v0 request (raw bytes: this
    layer does not speak the protocol otherwise) gets a response carrying its correlation id. Another
    program that took the port does not."""
    client_id = b"kctl-cluster"
    request = struct.pack(">hhih", 18, 0, PROBE_CORRELATION_ID, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(request)) + request)
            head = b""
            while len(head) < 8:
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
    except OSError:
        return False
    return struct.unpack(">ii", head)[1] == PROBE_CORRELATION_ID


def signal_process(pid: int, signum: int) -> str | None:
    """Send ``signum`` (after SIGCONT: a stopped process cannot handle SIGTERM); None when sent or
    the process is gone, else why it could not be (e.g. not permitted)."""
    try:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signum)
    except ProcessLookupError:
        return None
    except PermissionError as error:
        return f"cannot signal pid {pid}: {error.strerror}"
    return None


def wait_exit(pid: int, timeout: float) -> bool:
    """Poll until ``pid`` no longer runs or ``timeout`` passes; whether it exited."""
    deadline = time.monotonic() + timeout
    while command_line(pid) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True

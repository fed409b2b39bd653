"""A real ZooKeeper server for tests (the Debian ``zookeeper`` package), and its pytest fixture.

Test modules that need ZooKeeper import the session-scoped fixture::

    from zookeeper_server import zookeeper  # noqa: F401

One standalone server (``ZooKeeperServerMain``) serves the whole test session on 127.0.0.1 and a
free port, with its data directory under pytest's temporary directory. Tests isolate themselves
with a chroot of their own (``zookeeper.connect_string()``). The server's classpath is
``/usr/share/java/zookeeper.jar``, which is enough: Debian's jar names its dependencies (slf4j-api,
netty, zookeeper-jute, jetty9, metrics-core, commons-cli/io, jackson, snappy-java) in its manifest
``Class-Path``; ``slf4j-simple.jar`` is added when present so the server's log (``zookeeper.out``
in its directory) explains failures. Readiness is the ``srvr`` four-letter
word reporting a ``Mode`` (the server is serving), polled with a deadline.

``Notifications`` is the registry tests' way to wait for a change another process (or ZooKeeper)
makes: a registry listener that wakes waiters, with a timeout, instead of sleeping.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")  # optional: the server's log, for failures
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class Notifications:
    """A registry listener recording the reasons it is called with; ``wait_for`` blocks until a
    condition holds, re-checking it after every notification, up to a timeout."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self._condition = threading.Condition()

    def __call__(self, reason: str) -> None:
        with self._condition:
            self.reasons.append(reason)
            self._condition.notify_all()

    def clear(self) -> None:
        with self._condition:
            self.reasons.clear()

    def wait_for(self, predicate: Callable[[], object], timeout: float = 10.0) -> bool:
        """True once ``predicate()`` is true; False if it is still false after ``timeout`` s."""
        with self._condition:
            return bool(self._condition.wait_for(predicate, timeout))

    def wait_for_reason(self, reason: str, timeout: float = 10.0) -> bool:
        return self.wait_for(lambda: reason in self.reasons, timeout)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter command (``ruok``, ``srvr``) and return the answer ("" on failure)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """A standalone ZooKeeper server on 127.0.0.1:``port`` with its config, data and output under
    ``directory``. ``start()`` waits until it serves; ``stop()`` then ``start()`` again is a server
    restart on the same port and data (sessions younger than their timeout survive it)."""

    def __init__(self, directory: Path) -> None:
        java = shutil.which("java")
        if java is None or not ZOOKEEPER_JAR.is_file():
            pytest.fail(
                f"a real ZooKeeper is needed: install the Debian packages 'zookeeper' ({ZOOKEEPER_JAR}) "
                "and a Java runtime",
                pytrace=False,
            )
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)
        data_dir = directory / "data"
        data_dir.mkdir(exist_ok=True)
        config = directory / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    "tickTime=500",
                    "initLimit=10",
                    "syncLimit=5",
                    f"dataDir={data_dir}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "maxClientCnxns=0",
                    "forceSync=no",
                    "",
                ]
            )
        )
        self.command = [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=ruok,srvr,stat",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-cp",
            os.pathsep.join(str(jar) for jar in (ZOOKEEPER_JAR, SLF4J_SIMPLE_JAR) if jar.is_file()),
            MAIN_CLASS,
            str(config),
        ]

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connect_string(self, chroot: str | None = None) -> str:
        """``127.0.0.1:port/<chroot>``; a fresh unique chroot when none is given."""
        return f"{self.hosts}/{chroot or 'kctl-test-' + uuid.uuid4().hex[:12]}"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.out"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server output)"

    def start(self) -> ZooKeeperServer:
        with open(self.log_path, "ab") as output:
            process = subprocess.Popen(
                self.command,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.directory,
                env={**os.environ, "JVMFLAGS": ""},
            )
        self.process = process
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(
                    f"ZooKeeper exited with status {process.returncode} at start:\n{self.log_tail()}",
                    pytrace=False,
                )
            # 'ruok' answers imok as soon as the process listens; 'srvr' reports a Mode once it serves.
            if "Mode:" in four_letter_word(self.port, "srvr", timeout=0.5):
                return self
            time.sleep(0.05)  # polling interval of the readiness probe, bounded by the deadline
        self.stop()
        pytest.fail(
            f"ZooKeeper did not serve on port {self.port} within {START_TIMEOUT_S} s:\n{self.log_tail()}",
            pytrace=False,
        )

    def stop(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)


def start_zookeeper(directory: Path) -> ZooKeeperServer:
    """Start a standalone server with its config, data and output under ``directory``."""
    return ZooKeeperServer(directory).start()


_shared: ZooKeeperServer | None = None
_shared_users = 0


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper server for the whole test session. Each test module importing this
    fixture gets its own session-scoped fixture definition; they share one server, stopped when
    the last of them is torn down."""
    global _shared, _shared_users
    if _shared is None:
        _shared = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    server = _shared
    _shared_users += 1
    try:
        yield server
    finally:
        _shared_users -= 1
        if _shared_users == 0:
            _shared = None
            server.stop()

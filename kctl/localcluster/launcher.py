"""A local cluster that outlives the command starting it (``kctl cluster up/status/down``): one
ZooKeeper server and N brokers started detached under one directory, with their pids and ports in
``<directory>/cluster.json`` so that another shell can show or stop them.

    <directory>/cluster.json               the state: pids, ports, addresses, zookeeper.connect
    <directory>/zookeeper/                  zoo.cfg, data/, zookeeper.out
    <directory>/broker-<id>/data            the broker's log dir; data.log its stderr, data.out its stdout

``up()`` starts ZooKeeper, then brokers 1..N (``broker.id``; one ``zookeeper.connect`` with the chroot
``/kctl``), and waits, polling /brokers/ids until a deadline, until every broker is registered. A
second ``up()`` on a directory whose cluster is stopped starts it again on the same ports and data.
``status()`` reads the state, checks every pid (alive and still the process that was started: its
command line is compared) and marks the controller (/controller). ``down()`` stops the brokers one at
a time with SIGTERM (each does a controlled shutdown), then ZooKeeper, each waited for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kctl
from kctl.localcluster.cluster import LocalCluster
from kctl.localcluster.zookeeper import free_port

STATE_FILE = "cluster.json"
DEFAULT_DIRECTORY = Path("kctl-cluster")
CHROOT = "/kctl"
REGISTER_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
ZOOKEEPER_MARK = "ZooKeeperServerMain"
BROKER_MARK = "kctl broker start"


class ClusterStateError(RuntimeError):
    """No cluster in the directory, or one is running already."""


class ClusterStartError(RuntimeError):
    """A process did not come up, or a broker did not register before the deadline."""


@dataclasses.dataclass
class ProcessState:
    """One process of the cluster: ``role`` is "zookeeper" or "broker" (then ``broker_id``)."""

    role: str
    pid: int
    host: str
    port: int
    log_file: str
    broker_id: int | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclasses.dataclass
class ClusterState:
    """What ``cluster.json`` holds."""

    directory: str
    zookeeper_connect: str
    zookeeper: ProcessState
    brokers: list[ProcessState]
    properties: dict[str, str] = dataclasses.field(default_factory=dict)
    started_at_ms: int = 0

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        data = json.loads(text)
        return cls(
            directory=data["directory"],
            zookeeper_connect=data["zookeeper_connect"],
            zookeeper=ProcessState(**data["zookeeper"]),
            brokers=[ProcessState(**b) for b in data["brokers"]],
            properties=dict(data.get("properties", {})),
            started_at_ms=int(data.get("started_at_ms", 0)),
        )


@dataclasses.dataclass(frozen=True)
class ProcessStatus:
    """A process of the cluster as seen now."""

    role: str
    broker_id: int | None
    pid: int
    address: str
    alive: bool
    controller: bool
    log_file: str


def state_path(directory: Path) -> Path:
    return Path(directory) / STATE_FILE


def load_state(directory: Path) -> ClusterState:
    """The cluster.json of ``directory``; raises `ClusterStateError` when there is none."""
    path = state_path(directory)
    try:
        return ClusterState.from_json(path.read_text())
    except FileNotFoundError:
        raise ClusterStateError(
            f"no cluster in {directory} (no {STATE_FILE}): start one with `kctl cluster up`"
        ) from None
    except (ValueError, KeyError, TypeError) as error:
        raise ClusterStateError(f"{path} is not a cluster state file: {error}") from None


def process_alive(pid: int, mark: str = "") -> bool:
    """Whether ``pid`` runs (not a zombie) and its command line contains ``mark`` (guards against a
    pid reused by another program)."""
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own exited child
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
        return False
    return mark in cmdline


def _mark(process: ProcessState) -> str:
    return ZOOKEEPER_MARK if process.role == "zookeeper" else BROKER_MARK


def _running(state: ClusterState) -> list[ProcessState]:
    return [p for p in (state.zookeeper, *state.brokers) if process_alive(p.pid, _mark(p))]


def up(
    directory: Path,
    brokers: int = 3,
    *,
    base_port: int | None = None,
    properties: Mapping[str, str] | None = None,
    timeout: float = REGISTER_TIMEOUT_S,
) -> ClusterState:
    """Start ZooKeeper and ``brokers`` brokers under ``directory`` (see the module docstring) and
    wait until all are registered. ``base_port``: ZooKeeper on it, brokers on the next ones (default:
    the ports of a previous run in the directory, else free ports)."""
    directory = Path(directory).resolve()
    previous: ClusterState | None = None
    if state_path(directory).exists():
        previous = load_state(directory)
        running = _running(previous)
        if running:
            raise ClusterStateError(
                f"a cluster is running in {directory} ({len(running)} processes alive): "
                "`kctl cluster down` it first"
            )
    if brokers < 1:
        raise ValueError(f"a cluster needs at least one broker, not {brokers}")
    if base_port is not None:
        zookeeper_port = base_port
        broker_ports = {i: base_port + i for i in range(1, brokers + 1)}
    elif previous is not None:
        zookeeper_port = previous.zookeeper.port
        known = {b.broker_id: b.port for b in previous.brokers if b.broker_id is not None}
        broker_ports = {i: known.get(i) or free_port() for i in range(1, brokers + 1)}
    else:
        zookeeper_port = free_port()
        broker_ports = {i: free_port() for i in range(1, brokers + 1)}
    directory.mkdir(parents=True, exist_ok=True)
    # the brokers run this very kctl, wherever it was imported from (an installed package or a checkout)
    kctl_root = str(Path(kctl.__file__).resolve().parent.parent)
    python_path = os.pathsep.join(p for p in (kctl_root, os.environ.get("PYTHONPATH", "")) if p)
    cluster = LocalCluster(
        directory,
        brokers,
        properties=properties,
        chroot=CHROOT,
        zookeeper_port=zookeeper_port,
        broker_ports=broker_ports,
        detached=True,
        broker_env={"PYTHONPATH": python_path},
    )
    cluster.start()  # stops what it started when one process fails
    state = ClusterState(
        directory=str(directory),
        zookeeper_connect=cluster.zookeeper_connect,
        zookeeper=ProcessState(
            "zookeeper",
            _pid(cluster.zookeeper.process),
            "127.0.0.1",
            cluster.zookeeper.port,
            str(cluster.zookeeper.log_path),
        ),
        brokers=[
            ProcessState("broker", _pid(b.process), b.host, b.port, str(b.log_file), broker_id)
            for broker_id, b in cluster.brokers.items()
        ],
        properties=dict(properties or {}),
        started_at_ms=int(time.time() * 1000),
    )
    state_path(directory).write_text(state.to_json())
    try:
        wait_registered(state, timeout)
    except BaseException:
        cluster.stop()
        raise
    return state


def _pid(process: Any) -> int:
    return int(process.pid) if process is not None else -1


def _kazoo(state: ClusterState, timeout: float = 5.0) -> Any:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=state.zookeeper_connect, timeout=10.0)
    client.start(timeout=timeout)
    return client


def wait_registered(state: ClusterState, timeout: float = REGISTER_TIMEOUT_S) -> None:
    """Poll /brokers/ids until every broker of ``state`` is there; `ClusterStartError` at the deadline."""
    from kazoo.exceptions import NoNodeError

    wanted = {str(b.broker_id) for b in state.brokers}
    deadline = time.monotonic() + timeout
    client = _kazoo(state, timeout)
    try:
        registered: set[str] = set()
        while time.monotonic() < deadline:
            try:
                registered = set(client.get_children("/brokers/ids"))
            except NoNodeError:
                registered = set()
            if wanted <= registered:
                return
            time.sleep(0.1)  # polling interval, bounded by the deadline
        missing = ", ".join(sorted(wanted - registered, key=int))
        raise ClusterStartError(f"brokers not registered in ZooKeeper within {timeout:g} s: {missing}")
    finally:
        client.stop()
        client.close()


def controller_id(state: ClusterState) -> int | None:
    """The broker id in /controller, None when there is none or ZooKeeper does not answer."""
    from kazoo.exceptions import KazooException, NoNodeError

    from kctl.zk.model import RegistryError
    from kctl.zk.znodes import ControllerZNode

    try:
        client = _kazoo(state, timeout=3.0)
    except Exception:  # kazoo's timeout is not a KazooException subclass everywhere
        return None
    try:
        data, _ = client.get(ControllerZNode.path)
        return ControllerZNode.decode(data)
    except (NoNodeError, KazooException, RegistryError):
        return None
    finally:
        client.stop()
        client.close()


def status(directory: Path) -> list[ProcessStatus]:
    """ZooKeeper and every broker of the cluster in ``directory``: pid, address, alive, controller."""
    state = load_state(directory)
    zookeeper_alive = process_alive(state.zookeeper.pid, ZOOKEEPER_MARK)
    controller = controller_id(state) if zookeeper_alive else None
    rows = [
        ProcessStatus(
            "zookeeper",
            None,
            state.zookeeper.pid,
            state.zookeeper.address,
            zookeeper_alive,
            False,
            state.zookeeper.log_file,
        )
    ]
    for b in state.brokers:
        alive = process_alive(b.pid, BROKER_MARK)
        rows.append(
            ProcessStatus(
                "broker",
                b.broker_id,
                b.pid,
                b.address,
                alive,
                alive and controller == b.broker_id,
                b.log_file,
            )
        )
    return rows


def stop_process(pid: int, mark: str, timeout: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM ``pid`` (when it is still the process started) and wait for it to exit; SIGKILL after
    ``timeout``. Returns whether it was running."""
    if not process_alive(pid, mark):
        return False
    try:
        os.kill(pid, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while process_alive(pid, mark):
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.05)  # polling interval, bounded by the deadline
    return True


def down(directory: Path, timeout: float = STOP_TIMEOUT_S) -> list[ProcessStatus]:
    """Stop the brokers one at a time (SIGTERM: a controlled shutdown), then ZooKeeper, each waited
    for; returns what was running and is now stopped. cluster.json stays (``up`` reuses its ports)."""
    state = load_state(directory)
    stopped = []
    for b in state.brokers:
        if stop_process(b.pid, BROKER_MARK, timeout):
            stopped.append(ProcessStatus("broker", b.broker_id, b.pid, b.address, False, False, b.log_file))
    z = state.zookeeper
    if stop_process(z.pid, ZOOKEEPER_MARK, timeout):
        stopped.append(ProcessStatus("zookeeper", None, z.pid, z.address, False, False, z.log_file))
    return stopped

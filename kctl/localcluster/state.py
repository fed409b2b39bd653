"""``<directory>/cluster.json``: what ``kctl cluster up`` started and how — each ZooKeeper server's
(one, or the servers of an ensemble with their quorum and election ports) and every broker's port,
pid and log, ``zookeeper.connect`` and the ``-X`` properties given to every broker — so that ``kctl
cluster status/start/stop/restart/down`` work from any shell. A file written before ensembles
(one ``zookeeper`` object) still loads.

The pids are kept true by whoever looks (kctl.localcluster.launcher): a broker found running with
another pid (restarted by hand, or by ``kctl cluster start``) is written back. The file is replaced
atomically (written beside it, then renamed), so a reader never sees half of it.

    <directory>/cluster.json               this state
    <directory>/zookeeper/                  zoo.cfg, data/, zookeeper.out (one server)
    <directory>/zookeeper/zk-<id>/          the same, for each server of an ensemble
    <directory>/broker-<id>/data            the broker's log dir; data.log its stderr, data.out its stdout
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

STATE_FILE = "cluster.json"
CHROOT = "/kctl"


class ClusterStateError(RuntimeError):
    """No cluster in the directory, or one is running already."""


@dataclasses.dataclass
class ProcessState:
    """One process of the cluster: ``role`` is "zookeeper" (with ``server_id``, ``quorum_port`` and
    ``election_port`` for a server of an ensemble) or "broker" (then ``broker_id``, and ``rack``
    when ``kctl cluster up --racks`` gave it one)."""

    role: str
    pid: int
    host: str
    port: int
    log_file: str
    broker_id: int | None = None
    server_id: int | None = None
    quorum_port: int | None = None
    election_port: int | None = None
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def name(self) -> str:
        """ "ZooKeeper", "ZooKeeper <id>" (a server of an ensemble) or "broker <id>", as messages
        name it."""
        return process_name(self.role, self.broker_id, self.server_id)


@dataclasses.dataclass
class ClusterState:
    """What ``cluster.json`` holds."""

    directory: str
    zookeeper_connect: str
    zookeepers: list[ProcessState]
    brokers: list[ProcessState]
    properties: dict[str, str] = dataclasses.field(default_factory=dict)
    started_at_ms: int = 0

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def broker(self, broker_id: int) -> ProcessState:
        """The broker with ``broker_id``; `ClusterStateError` naming the ids there are otherwise."""
        for b in self.brokers:
            if b.broker_id == broker_id:
                return b
        ids = ", ".join(str(b.broker_id) for b in self.brokers)
        raise ClusterStateError(f"the cluster in {self.directory} has no broker {broker_id} (brokers: {ids})")

    def broker_log_dir(self, broker_id: int) -> Path:
        """``<directory>/broker-<id>/data``: the broker's log dir (kctl.localcluster.cluster)."""
        return Path(self.directory) / f"broker-{broker_id}" / "data"

    def zookeeper_config(self, server: ProcessState) -> Path:
        """The zoo.cfg of ``server`` (kctl.localcluster.zookeeper, zookeeper_ensemble)."""
        base = Path(self.directory) / "zookeeper"
        if server.server_id is not None:
            base = base / f"zk-{server.server_id}"
        return base / "zoo.cfg"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        data = json.loads(text)
        servers = data["zookeepers"] if "zookeepers" in data else [data["zookeeper"]]
        return cls(
            directory=data["directory"],
            zookeeper_connect=data["zookeeper_connect"],
            zookeepers=[ProcessState(**z) for z in servers],
            brokers=[ProcessState(**b) for b in data["brokers"]],
            properties=dict(data.get("properties", {})),
            started_at_ms=int(data.get("started_at_ms", 0)),
        )


@dataclasses.dataclass(frozen=True)
class ProcessStatus:
    """A process of the cluster as seen now (``pid`` the one found running, else the recorded one)."""

    role: str
    broker_id: int | None
    pid: int
    address: str
    alive: bool
    controller: bool
    log_file: str
    server_id: int | None = None

    @property
    def name(self) -> str:
        return process_name(self.role, self.broker_id, self.server_id)


def process_name(role: str, broker_id: int | None, server_id: int | None) -> str:
    if role == "zookeeper":
        return "ZooKeeper" if server_id is None else f"ZooKeeper {server_id}"
    return f"broker {broker_id}"


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


def save_state(directory: Path, state: ClusterState) -> None:
    """Replace ``directory``'s cluster.json with ``state`` atomically."""
    path = state_path(directory)
    temporary = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    temporary.write_text(state.to_json())
    os.replace(temporary, path)

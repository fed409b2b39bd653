"""A local cluster that outlives the command starting it (``kctl cluster up/start/stop/restart/status/
down``): one ZooKeeper server (or an ensemble of 3 or 5 in quorum mode) and N brokers started
detached under one directory, with their ports, pids and configuration in
``<directory>/cluster.json`` (kctl.localcluster.state) so that another shell can show, stop or
start them.

``up()`` starts ZooKeeper, then brokers 1..N (``broker.id``; one ``zookeeper.connect`` with the chroot
``/kctl``; each its own ``broker.rack`` with ``racks``, see `broker_racks`), and waits, polling
/brokers/ids until a deadline, until every broker is registered; it refuses while any process of the
directory's cluster runs. ``start()`` starts what of a recorded cluster does not run (ZooKeeper
first), with the recorded configuration; ``stop()`` stops brokers with SIGTERM (each does a
controlled shutdown) and waits for each to exit; ``restart()`` is both; ``down()`` stops every
broker, then ZooKeeper.

What runs is found by kctl.localcluster.processes (the broker holding its log dir's lock, the pid
file ``kctl broker start`` writes, the recorded pid), so a broker restarted by hand is shown with its
real pid, written back to cluster.json, and stopped by ``down()``. A broker that cannot be stopped,
or whose address still answers as a Kafka broker although no process of it was found, is reported,
and ZooKeeper is then left running so that the brokers still up do not hang without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import kctl
from kctl.localcluster.cluster import LocalCluster
from kctl.localcluster.processes import (
    BROKER_MARK,
    ZOOKEEPER_MARK,
    broker_pid,
    kafka_answers,
    process_alive,
    signal_process,
    wait_exit,
    zookeeper_pid,
)
from kctl.localcluster.state import (
    CHROOT,
    STATE_FILE,
    ClusterState,
    ClusterStateError,
    ProcessState,
    ProcessStatus,
    load_state,
    save_state,
    state_path,
)
from kctl.localcluster.zookeeper import QuorumPeer, ZooKeeperServer, free_port
from kctl.localcluster.zookeeper_ensemble import ZooKeeperEnsemble

__all__ = [
    "BROKER_MARK",
    "CHROOT",
    "STATE_FILE",
    "ZOOKEEPER_MARK",
    "ClusterStartError",
    "ClusterState",
    "ClusterStateError",
    "Observed",
    "ProcessState",
    "ProcessStatus",
    "StartReport",
    "StopFailure",
    "StopReport",
    "broker_racks",
    "controller_id",
    "down",
    "load_state",
    "observe",
    "process_alive",
    "refuse_if_running",
    "restart",
    "start",
    "state_path",
    "status",
    "stop",
    "stop_process",
    "up",
    "wait_registered",
    "wait_unregistered",
    "zookeeper_client",
]

DEFAULT_DIRECTORY = Path("kctl-cluster")
REGISTER_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
KILL_WAIT_S = 10.0  # how long a SIGKILLed process may take to go


_QUIET = logging.getLogger("kctl.localcluster.kazoo")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class ClusterStartError(RuntimeError):
    """A process did not come up, or a broker did not register before the deadline."""


def broker_racks(spec: str, brokers: int) -> dict[int, str]:
    """The ``broker.rack`` of each of brokers 1..``brokers`` from ``kctl cluster up --racks``: a
    comma-separated list of one rack per broker in broker id order (``r0,r1,r2``), or one name with
    ``{id}`` in it, replaced by each broker's id (``RACK{id}``: RACK1, RACK2, ...). ValueError, its
    message for the operator, otherwise."""
    if "{id}" in spec:
        if "," in spec:
            raise ValueError(f"--racks {spec!r}: a pattern with {{id}} is one name, not a list")
        return {i: spec.replace("{id}", str(i)) for i in range(1, brokers + 1)}
    racks = [rack.strip() for rack in spec.split(",")]
    if len(racks) != brokers or not all(racks):
        raise ValueError(
            f"--racks {spec!r}: give one rack per broker ({brokers}, comma-separated), or one name "
            "with {id} in it"
        )
    return dict(enumerate(racks, start=1))


# -- what runs -------------------------------------------------------------------------------------
@dataclasses.dataclass
class Observed:
    """A cluster's state with the pids found running now (None: not running)."""

    state: ClusterState
    zookeepers: list[int | None]
    """Each ZooKeeper server's pid, as ``state.zookeepers``."""
    brokers: dict[int, int | None]

    @property
    def zookeeper(self) -> int | None:
        """The pid of a ZooKeeper server that runs, None when none does."""
        return next((pid for pid in self.zookeepers if pid is not None), None)

    def running(self) -> list[str]:
        """The names of the processes running ("ZooKeeper", "broker 2", ...)."""
        names = [
            z.name for z, pid in zip(self.state.zookeepers, self.zookeepers, strict=True) if pid is not None
        ]
        return names + [f"broker {i}" for i, pid in self.brokers.items() if pid is not None]


def observe(directory: Path, *, write_back: bool = True) -> Observed:
    """Load ``directory``'s state and find which of its processes run (kctl.localcluster.processes).
    Pids found that differ from the recorded ones are written back to cluster.json (unless
    ``write_back`` is false, or the file cannot be written)."""
    directory = Path(directory).resolve()
    state = load_state(directory)
    changed = state.directory != str(directory)
    state.directory = str(directory)  # the directory may have been moved while the cluster was stopped
    zookeepers = [zookeeper_pid(state.zookeeper_config(z), z.pid) for z in state.zookeepers]
    brokers: dict[int, int | None] = {}
    for b in state.brokers:
        assert b.broker_id is not None
        pid = broker_pid(state.broker_log_dir(b.broker_id), b.pid)
        brokers[b.broker_id] = pid
        if pid is not None and pid != b.pid:
            b.pid, changed = pid, True
    if changed and write_back:
        with contextlib.suppress(OSError):  # someone else's cluster, read-only: the answer stays right
            save_state(directory, state)
    return Observed(state, zookeepers, brokers)


def refuse_if_running(directory: Path) -> ClusterState | None:
    """The state of a stopped cluster in ``directory`` (None when there is none); `ClusterStateError`
    naming what runs when any of its processes does."""
    directory = Path(directory).resolve()
    if not state_path(directory).exists():
        return None
    observed = observe(directory)
    running = observed.running()
    if running:
        raise ClusterStateError(
            f"a cluster is running in {directory} ({', '.join(running)}): `kctl cluster start` starts "
            "its stopped brokers, `kctl cluster down` stops it"
        )
    return observed.state


ZooKeeper = ZooKeeperServer | ZooKeeperEnsemble


def _local_cluster(
    directory: Path,
    size: int,
    properties: Mapping[str, str],
    zookeeper: ZooKeeper,
    ports: Mapping[int, int],
    racks: Mapping[int, str] | None = None,
) -> LocalCluster:
    """The LocalCluster of ``directory`` (not started): detached processes, this very kctl; it starts
    and stops ``zookeeper`` with the brokers."""
    # the brokers run this very kctl, wherever it was imported from (an installed package or a checkout)
    kctl_root = str(Path(kctl.__file__).resolve().parent.parent)
    python_path = os.pathsep.join(p for p in (kctl_root, os.environ.get("PYTHONPATH", "")) if p)
    return LocalCluster(
        directory,
        size,
        properties=properties,
        zookeeper=zookeeper,
        owns_zookeeper=True,
        chroot=CHROOT,
        broker_ports=ports,
        detached=True,
        broker_env={"PYTHONPATH": python_path},
        racks=racks,
    )


def _zookeeper(directory: Path, servers: Sequence[ProcessState]) -> ZooKeeper:
    """The ZooKeeper server, or ensemble, ``servers`` describe (recorded ports)."""
    if len(servers) == 1 and servers[0].server_id is None:
        return ZooKeeperServer(directory / "zookeeper", port=servers[0].port, detached=True)
    peers = []
    for z in servers:
        if z.server_id is None or z.quorum_port is None or z.election_port is None:
            raise ClusterStateError(f"{z.name} of the ensemble in {directory} has no quorum ports recorded")
        peers.append(QuorumPeer(z.server_id, z.quorum_port, z.election_port))
    return ZooKeeperEnsemble(
        directory / "zookeeper",
        len(servers),
        client_ports=[z.port for z in servers],
        peers=peers,
        detached=True,
    )


def _zookeeper_states(zookeeper: ZooKeeper) -> list[ProcessState]:
    """What cluster.json records of ``zookeeper``'s servers."""
    if isinstance(zookeeper, ZooKeeperServer):
        return [
            ProcessState(
                "zookeeper", _pid(zookeeper.process), "127.0.0.1", zookeeper.port, str(zookeeper.log_path)
            )
        ]
    return [
        ProcessState(
            "zookeeper",
            _pid(server.process),
            "127.0.0.1",
            server.port,
            str(server.log_path),
            server_id=peer.server_id,
            quorum_port=peer.quorum_port,
            election_port=peer.election_port,
        )
        for server, peer in zip(zookeeper.servers, zookeeper.peers, strict=True)
    ]


def _new_zookeeper_states(count: int, client_ports: Sequence[int]) -> list[ProcessState]:
    """The servers of a new ZooKeeper (one, or an ensemble of ``count``) on ``client_ports``."""
    if count == 1:
        return [ProcessState("zookeeper", -1, "127.0.0.1", client_ports[0], "")]
    return [
        ProcessState(
            "zookeeper",
            -1,
            "127.0.0.1",
            port,
            "",
            server_id=i,
            quorum_port=free_port(),
            election_port=free_port(),
        )
        for i, port in enumerate(client_ports, start=1)
    ]


def _servers(zookeeper: ZooKeeper) -> list[ZooKeeperServer]:
    return zookeeper.servers if isinstance(zookeeper, ZooKeeperEnsemble) else [zookeeper]


def recorded_cluster(state: ClusterState) -> LocalCluster:
    """The LocalCluster ``state`` describes, with its recorded ports and properties (not started)."""
    ports = {b.broker_id: b.port for b in state.brokers if b.broker_id is not None}
    racks = {b.broker_id: b.rack for b in state.brokers if b.broker_id is not None and b.rack is not None}
    directory = Path(state.directory)
    zookeeper = _zookeeper(directory, state.zookeepers)
    return _local_cluster(directory, len(state.brokers), state.properties, zookeeper, ports, racks)


# -- up --------------------------------------------------------------------------------------------
def up(
    directory: Path,
    brokers: int = 3,
    *,
    base_port: int | None = None,
    properties: Mapping[str, str] | None = None,
    timeout: float = REGISTER_TIMEOUT_S,
    zookeepers: int = 1,
    racks: Mapping[int, str] | None = None,
) -> ClusterState:
    """Start ZooKeeper (one server, or an ensemble of ``zookeepers`` servers in quorum mode) and
    ``brokers`` brokers under ``directory`` (see the module docstring) and wait until all are
    registered. ``base_port``: ZooKeeper on it, brokers on the next ones, then the other servers of an
    ensemble (default: the ports of a previous run in the directory, else free ports). ``racks``: the
    ``broker.rack`` of each broker by id (recorded, kept by ``start()``)."""
    directory = Path(directory).resolve()
    previous = refuse_if_running(directory)
    if brokers < 1:
        raise ValueError(f"a cluster needs at least one broker, not {brokers}")
    if zookeepers < 1:
        raise ValueError(f"ZooKeeper needs at least one server, not {zookeepers}")
    if base_port is not None:
        client_ports = [base_port, *range(base_port + brokers + 1, base_port + brokers + zookeepers)]
        servers = _new_zookeeper_states(zookeepers, client_ports)
        broker_ports = {i: base_port + i for i in range(1, brokers + 1)}
    elif previous is not None:
        if len(previous.zookeepers) == zookeepers:
            servers = previous.zookeepers
        else:
            servers = _new_zookeeper_states(zookeepers, [free_port() for _ in range(zookeepers)])
        known = {b.broker_id: b.port for b in previous.brokers if b.broker_id is not None}
        broker_ports = {i: known.get(i) or free_port() for i in range(1, brokers + 1)}
    else:
        servers = _new_zookeeper_states(zookeepers, [free_port() for _ in range(zookeepers)])
        broker_ports = {i: free_port() for i in range(1, brokers + 1)}
    directory.mkdir(parents=True, exist_ok=True)
    zookeeper = _zookeeper(directory, servers)
    racks = dict(racks or {})
    cluster = _local_cluster(directory, brokers, dict(properties or {}), zookeeper, broker_ports, racks)
    cluster.start()  # stops what it started when one process fails
    state = ClusterState(
        directory=str(directory),
        zookeeper_connect=cluster.zookeeper_connect,
        zookeepers=_zookeeper_states(zookeeper),
        brokers=[
            ProcessState(
                "broker",
                _pid(b.process),
                b.host,
                b.port,
                str(b.log_file),
                broker_id,
                rack=racks.get(broker_id),
            )
            for broker_id, b in cluster.brokers.items()
        ],
        properties=dict(properties or {}),
        started_at_ms=int(time.time() * 1000),
    )
    save_state(directory, state)
    try:
        wait_registered(state, timeout)
    except BaseException:
        cluster.stop()
        raise
    return state


def _pid(process: Any) -> int:
    return int(process.pid) if process is not None else -1


# -- ZooKeeper: registrations and the controller --------------------------------------------------
def zookeeper_client(state: ClusterState, timeout: float = 5.0) -> Any:
    """A started kazoo client on the cluster's ZooKeeper, in its chroot (the caller stops it). Its
    log is kept quiet: a ZooKeeper that does not answer is reported by the callers, in one line."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=state.zookeeper_connect, timeout=10.0, logger=_QUIET)
    client.start(timeout=timeout)
    return client


def registrations(state: ClusterState, timeout: float = 5.0) -> dict[int, int]:
    """The registered brokers (/brokers/ids) and the session owning each registration."""
    from kazoo.exceptions import NoNodeError

    client = zookeeper_client(state, timeout)
    try:
        return _registrations(client)
    except NoNodeError:
        return {}
    finally:
        client.stop()
        client.close()


def _registrations(client: Any) -> dict[int, int]:
    from kazoo.exceptions import NoNodeError

    found = {}
    for child in client.get_children("/brokers/ids"):
        try:
            _, stat = client.get(f"/brokers/ids/{child}")
        except NoNodeError:
            continue  # gone meanwhile
        found[int(child)] = stat.ephemeralOwner
    return found


def wait_registered(
    state: ClusterState,
    timeout: float = REGISTER_TIMEOUT_S,
    broker_ids: Iterable[int] | None = None,
    *,
    not_sessions: Mapping[int, int] | None = None,
) -> None:
    """Poll /brokers/ids until every broker of ``broker_ids`` (default: all of ``state``) is
    registered — by another session than ``not_sessions[id]`` when given (a restarted broker's new
    registration, not the old one lingering); `ClusterStartError` at the deadline."""
    from kazoo.exceptions import NoNodeError

    wanted = (
        set(broker_ids)
        if broker_ids is not None
        else {b.broker_id for b in state.brokers if b.broker_id is not None}
    )
    old = dict(not_sessions or {})
    deadline = time.monotonic() + timeout
    client = zookeeper_client(state, timeout)
    try:
        fresh: set[int] = set()
        while time.monotonic() < deadline:
            try:
                found = _registrations(client)
            except NoNodeError:
                found = {}
            fresh = {i for i, session in found.items() if i in wanted and old.get(i) != session}
            if fresh >= wanted:
                return
            time.sleep(0.1)  # polling interval, bounded by the deadline
        missing = ", ".join(str(i) for i in sorted(wanted - fresh))
        raise ClusterStartError(f"brokers not registered in ZooKeeper within {timeout:g} s: {missing}")
    finally:
        client.stop()
        client.close()


def wait_unregistered(
    state: ClusterState, broker_id: int, timeout: float, on_wait: Callable[[str], None] | None = None
) -> None:
    """Poll until ``broker_id`` is not registered in /brokers/ids (call it when no process of it
    runs: a registration left is a killed process's, gone when its session expires);
    `ClusterStartError` at the deadline."""
    deadline = time.monotonic() + timeout
    told = False
    while True:
        try:
            session = registrations(state).get(broker_id)
        except Exception:  # ZooKeeper not answering: the broker's start will say so
            return
        if session is None:
            return
        if not told and on_wait is not None:
            on_wait(
                f"broker {broker_id} is still registered by the session {session:#x} of a process "
                "that no longer runs: waiting for that session to expire"
            )
            told = True
        if time.monotonic() >= deadline:
            raise ClusterStartError(
                f"broker {broker_id}: the registration of its previous process (ZooKeeper session "
                f"{session:#x}) did not expire within {timeout:g} s"
            )
        time.sleep(0.2)  # polling interval, bounded by the deadline


def controller_id(state: ClusterState) -> int | None:
    """The broker id in /controller, None when there is none or ZooKeeper does not answer."""
    from kazoo.exceptions import KazooException, NoNodeError

    from kctl.zk.model import RegistryError
    from kctl.zk.znodes import ControllerZNode

    try:
        client = zookeeper_client(state, timeout=3.0)
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


# -- status ----------------------------------------------------------------------------------------
def status(directory: Path) -> list[ProcessStatus]:
    """ZooKeeper and every broker of the cluster in ``directory``: the pid found running (the
    recorded one when it does not run), address, alive, controller."""
    observed = observe(directory)
    state = observed.state
    controller = controller_id(state) if observed.zookeeper is not None else None
    rows = [
        ProcessStatus("zookeeper", None, z.pid, z.address, pid is not None, False, z.log_file, z.server_id)
        for z, pid in zip(state.zookeepers, observed.zookeepers, strict=True)
    ]
    for b in state.brokers:
        assert b.broker_id is not None
        alive = observed.brokers[b.broker_id] is not None
        leads = alive and controller == b.broker_id
        rows.append(ProcessStatus("broker", b.broker_id, b.pid, b.address, alive, leads, b.log_file))
    return rows


# -- start -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class StartReport:
    """What ``start()`` started, and what was running already (names: "ZooKeeper", "broker 2")."""

    state: ClusterState
    started: list[ProcessStatus]
    already_running: list[str]


def _selected(state: ClusterState, broker_ids: Sequence[int] | None) -> list[int]:
    if not broker_ids:
        return [b.broker_id for b in state.brokers if b.broker_id is not None]
    for broker_id in broker_ids:
        state.broker(broker_id)  # ClusterStateError for an id the cluster does not have
    return list(dict.fromkeys(broker_ids))


def _status_of(process: ProcessState, pid: int | None, alive: bool) -> ProcessStatus:
    return ProcessStatus(
        process.role, process.broker_id, pid if pid is not None else process.pid, process.address,
        alive, False, process.log_file, process.server_id,
    )  # fmt: skip


def start(
    directory: Path,
    broker_ids: Sequence[int] | None = None,
    timeout: float = REGISTER_TIMEOUT_S,
    on_wait: Callable[[str], None] | None = None,
) -> StartReport:
    """Start, with the recorded configuration, ZooKeeper when it does not run and each broker of
    ``broker_ids`` (default: all) that does not run; wait until those are registered. A broker whose
    previous process is gone but still registered (killed: its ZooKeeper session lives on until it
    expires) is started once that registration has expired (``on_wait`` is told). On a failure,
    what this call started is stopped again and the error raised (`ClusterStartError`,
    kctl.localcluster's `ZooKeeperStartError` and `BrokerStartError`)."""
    observed = observe(directory)
    state = observed.state
    wanted = _selected(state, broker_ids)
    cluster = recorded_cluster(state)
    started: list[ProcessStatus] = []
    stops: list[Any] = []
    servers = list(zip(state.zookeepers, _servers(cluster.zookeeper), observed.zookeepers, strict=True))
    already = [recorded.name for recorded, _, pid in servers if pid is not None]
    try:
        missing = [(recorded, server) for recorded, server, pid in servers if pid is None]
        for _, server in missing:  # an ensemble's servers serve only once a quorum of them runs
            if server.quorum:
                server.launch()
            else:
                server.start(timeout)
            stops.append(server.stop)
        for recorded, server in missing:
            if server.quorum:
                server.wait_serving(timeout)
            recorded.pid = _pid(server.process)
            started.append(_status_of(recorded, None, True))
        if missing:
            save_state(Path(state.directory), state)
        for broker_id in wanted:
            if observed.brokers[broker_id] is not None:
                already.append(f"broker {broker_id}")
                continue
            wait_unregistered(state, broker_id, timeout, on_wait)
            process = cluster.broker(broker_id)
            process.start(timeout)
            stops.append(process.stop)
            recorded = state.broker(broker_id)
            recorded.pid = _pid(process.process)
            save_state(Path(state.directory), state)
            started.append(_status_of(recorded, None, True))
        new = [s.broker_id for s in started if s.broker_id is not None]
        if new:
            wait_registered(state, timeout, new)
    except BaseException:
        for stop_one in reversed(stops):
            stop_one()
        raise
    return StartReport(state, started, already)


# -- stop, restart, down ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class StopFailure:
    """A process that could not be stopped: its name ("broker 2"), pid (None: not found) and why."""

    name: str
    pid: int | None
    reason: str

    def __str__(self) -> str:
        pid = f" (pid {self.pid})" if self.pid is not None else ""
        return f"{self.name}{pid}: {self.reason}"


@dataclasses.dataclass
class StopReport:
    """What ``stop()`` stopped (``killed``: the names of those that needed SIGKILL), what was not
    running, and what it could not stop."""

    stopped: list[ProcessStatus] = dataclasses.field(default_factory=list)
    killed: list[str] = dataclasses.field(default_factory=list)
    not_running: list[str] = dataclasses.field(default_factory=list)
    failed: list[StopFailure] = dataclasses.field(default_factory=list)


def _terminate(pid: int, name: str, timeout: float, kill: bool, report: StopReport) -> bool:
    """SIGTERM ``pid`` and wait for it to exit (then SIGKILL when ``kill``); records a failure in
    ``report`` and returns False when it still runs."""
    problem = signal_process(pid, signal.SIGTERM)
    if problem is None and wait_exit(pid, timeout):
        return True
    if problem is None and kill:
        problem = signal_process(pid, signal.SIGKILL)
        if problem is None and wait_exit(pid, KILL_WAIT_S):
            report.killed.append(name)
            return True
        problem = problem or f"still running {KILL_WAIT_S:g} s after SIGKILL"
    what = problem or f"did not exit within {timeout:g} s of SIGTERM (its controlled shutdown may still run)"
    report.failed.append(StopFailure(name, pid, what))
    return False


def _stop_order(state: ClusterState, ids: list[int], zookeeper_running: bool) -> list[int]:
    """``ids`` with the controller last (its leaderships move once, and no new controller is
    elected for each broker stopped)."""
    controller = controller_id(state) if zookeeper_running else None
    return sorted(ids, key=lambda i: i == controller)


def stop(
    directory: Path,
    broker_ids: Sequence[int] | None = None,
    timeout: float = STOP_TIMEOUT_S,
    *,
    kill: bool = False,
    zookeeper: bool | None = None,
) -> StopReport:
    """Stop each broker of ``broker_ids`` (default: all) that runs, one at a time, with SIGTERM (a
    controlled shutdown), waiting up to ``timeout`` for each to exit (then SIGKILL when ``kill``).
    ZooKeeper (``zookeeper``; default: when no broker was named) is stopped last, and only when
    every broker of the cluster is stopped. A broker whose address still answers as a Kafka broker
    although no process of it was found is a failure too (it may run where kctl cannot see it)."""
    observed = observe(directory)
    state = observed.state
    wanted = _selected(state, broker_ids)
    report = StopReport()
    for broker_id in _stop_order(state, wanted, observed.zookeeper is not None):
        recorded = state.broker(broker_id)
        pid = observed.brokers[broker_id]
        if pid is None:
            report.not_running.append(recorded.name)
        elif _terminate(pid, recorded.name, timeout, kill, report):
            report.stopped.append(_status_of(recorded, pid, False))
    for broker_id in wanted:
        recorded = state.broker(broker_id)
        log_dir = state.broker_log_dir(broker_id)
        if broker_pid(log_dir, recorded.pid) is None and kafka_answers(recorded.host, recorded.port):
            report.failed.append(
                StopFailure(
                    recorded.name,
                    None,
                    f"a Kafka broker still answers on {recorded.address}, but no process of {log_dir} "
                    "was found (started where kctl cannot see it?)",
                )
            )
    if zookeeper is None:
        zookeeper = not broker_ids
    if zookeeper:
        _stop_zookeeper(observed, timeout, report)
    return report


def _stop_zookeeper(observed: Observed, timeout: float, report: StopReport) -> None:
    brokers_left = report.failed or any(
        broker_pid(observed.state.broker_log_dir(b.broker_id), b.pid) is not None
        for b in observed.state.brokers
        if b.broker_id is not None
    )
    for z, pid in zip(observed.state.zookeepers, observed.zookeepers, strict=True):
        if pid is None:
            report.not_running.append(z.name)
        elif brokers_left:
            report.failed.append(StopFailure(z.name, pid, "left running: a broker of the cluster still runs"))
        elif _terminate(pid, z.name, timeout, True, report):
            report.stopped.append(_status_of(z, pid, False))


def down(directory: Path, timeout: float = STOP_TIMEOUT_S) -> StopReport:
    """Stop every broker of the cluster, one at a time (SIGTERM, SIGKILL after ``timeout``), then
    ZooKeeper (left running when a broker could not be stopped). cluster.json stays (``up`` and
    ``start`` reuse its ports and configuration)."""
    return stop(directory, None, timeout, kill=True, zookeeper=True)


def restart(
    directory: Path,
    broker_ids: Sequence[int] | None = None,
    timeout: float = STOP_TIMEOUT_S,
    on_wait: Callable[[str], None] | None = None,
) -> tuple[StopReport, StartReport | None]:
    """Stop the brokers of ``broker_ids`` (default: all; SIGTERM, waiting for each), then start them
    again (ZooKeeper too when it does not run). When one cannot be stopped nothing is started (the
    start report is None)."""
    stopped = stop(directory, broker_ids, timeout, zookeeper=False)
    if stopped.failed:
        return stopped, None
    return stopped, start(directory, broker_ids, timeout, on_wait)


def stop_process(pid: int, mark: str, timeout: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM ``pid`` (when it is still a process whose command line holds ``mark``) and wait for
    it to exit; SIGKILL after ``timeout``. Returns whether it was running."""
    if not process_alive(pid, mark):
        return False
    _terminate(pid, f"pid {pid}", timeout, True, StopReport())
    return True

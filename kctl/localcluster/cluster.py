"""``LocalCluster``: one ZooKeeper server and N ``kctl broker start`` processes on this machine.

    with LocalCluster(tmp_path, size=3) as cluster:
        admin = AdminClient(cluster.bootstrap_servers)
        cluster.kill(2)                  # SIGKILL broker 2; its /brokers/ids/2 goes when its session expires
        cluster.restart(2)               # same port, same log directory

Brokers have ``broker.id`` 1..N and share one ``zookeeper.connect`` with a chroot of the cluster's
own; each keeps its log directory under ``base_dir`` (``broker-<id>/data``, stderr in
``broker-<id>/data.log``); ``racks`` gives a broker its own ``broker.rack`` (rack-aware placement,
fetching from the closest replica). The ZooKeeper server (or, with ``zookeepers=3``, a 3-server ensemble in
quorum mode, `ZooKeeperEnsemble`) is started under ``base_dir/zookeeper`` unless one is passed in (the
shared test-session server), in which case the cluster leaves it running at stop (unless
``owns_zookeeper``: ``kctl cluster up`` passes the server or ensemble of its recorded ports).
What the brokers do together is what the broker implements: today each registers itself in
ZooKeeper and serves the partitions it leads. ``broker_ports`` fixes the brokers' ports (default:
the kernel picks); ``detached=True`` starts every process in a session of its own that outlives
this one (``kctl cluster up``, kctl.localcluster.launcher).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from kctl.localcluster.broker import BrokerProcess
from kctl.localcluster.zookeeper import ZooKeeperServer, new_chroot
from kctl.localcluster.zookeeper_ensemble import ZooKeeperEnsemble


class LocalCluster:
    """A ZooKeeper server and ``size`` broker processes, started by `start()`."""

    def __init__(
        self,
        base_dir: Path,
        size: int = 3,
        *,
        properties: Mapping[str, str] | None = None,
        zookeeper: ZooKeeperServer | ZooKeeperEnsemble | None = None,
        chroot: str | None = None,
        zookeeper_port: int | None = None,
        zookeepers: int = 1,
        owns_zookeeper: bool | None = None,
        broker_ports: Mapping[int, int] | None = None,
        detached: bool = False,
        broker_env: Mapping[str, str] | None = None,
        racks: Mapping[int, str] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one broker, not {size}")
        self.base_dir = Path(base_dir)
        self.size = size
        self.properties = dict(properties or {})
        self.racks = dict(racks or {})
        self._own_zookeeper = zookeeper is None if owns_zookeeper is None else owns_zookeeper
        self.zookeeper: ZooKeeperServer | ZooKeeperEnsemble
        if zookeeper is not None:
            self.zookeeper = zookeeper
        elif zookeepers > 1:
            self.zookeeper = ZooKeeperEnsemble(self.base_dir / "zookeeper", zookeepers, detached=detached)
        else:
            self.zookeeper = ZooKeeperServer(
                self.base_dir / "zookeeper", port=zookeeper_port, detached=detached
            )
        self.chroot = chroot or new_chroot("kctl-cluster")
        self.brokers: dict[int, BrokerProcess] = {
            broker_id: BrokerProcess(
                self.base_dir / f"broker-{broker_id}" / "data",
                {
                    "broker.id": str(broker_id),
                    "zookeeper.connect": self.zookeeper_connect,
                    # Kafka's default of 3 cannot be met by a smaller cluster: its groups would
                    # have no coordinator (Kafka's own single-broker configs set 1 the same way).
                    "offsets.topic.replication.factor": str(min(3, size)),
                    **self.properties,
                    **({"broker.rack": self.racks[broker_id]} if broker_id in self.racks else {}),
                },
                detached=detached,
                env=broker_env,
            )
            for broker_id in range(1, size + 1)
        }
        for broker_id, port in (broker_ports or {}).items():
            self.broker(broker_id).port = port

    def __repr__(self) -> str:
        return f"<LocalCluster {self.size} brokers {self.zookeeper_connect}>"

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def zookeeper_connect(self) -> str:
        """The brokers' ``zookeeper.connect``: ``127.0.0.1:PORT/<chroot>``."""
        return self.zookeeper.connect_string(self.chroot)

    def start(self) -> LocalCluster:
        """Start ZooKeeper (when the cluster owns it), then every broker, each waited for."""
        if self._own_zookeeper and not self.zookeeper.running:
            self.zookeeper.start()
        try:
            for broker in self.brokers.values():
                if not broker.running:
                    broker.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every broker cleanly (SIGTERM), then ZooKeeper when the cluster owns it."""
        for broker in self.brokers.values():
            broker.stop()
        if self._own_zookeeper:
            self.zookeeper.stop()

    def broker(self, broker_id: int) -> BrokerProcess:
        """The broker with ``broker.id`` ``broker_id`` (1..size)."""
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise KeyError(f"no broker {broker_id} in {self!r} (ids 1..{self.size})") from None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,host:port,...`` of the running brokers, in broker.id order."""
        return ",".join(broker.bootstrap for broker in self.brokers.values() if broker.running)

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker (an unclean stop)."""
        self.broker(broker_id).kill()

    def stop_broker(self, broker_id: int) -> None:
        """SIGTERM one broker (a clean stop)."""
        self.broker(broker_id).stop()

    def restart(self, broker_id: int, *, clean: bool = True) -> BrokerProcess:
        """Stop one broker (if running) and start it again on the same port and log directory."""
        broker = self.broker(broker_id)
        if broker.running:
            return broker.restart(clean=clean)
        return broker.start()

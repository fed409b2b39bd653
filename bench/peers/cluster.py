"""The peer harness's ``--cluster`` systems: 3 brokers each, every topic with replication factor 3 and
``min.insync.replicas=2``, produced to with acks=all.

- kctl: a ``kctl.localcluster.LocalCluster`` — one ZooKeeper server (Debian's package) and 3
  ``kctl broker start`` processes in ZooKeeper mode, as ``kctl cluster up`` starts them.
- Apache Kafka 3.9: 3 KRaft nodes with the combined broker+controller roles
  (``controller.quorum.voters`` = the 3), each formatted with one cluster id, the same JVM flags and
  heap per node as the single-node peer.

Both share one broker-side configuration where the two have the same setting: 3 partitions per
topic (one leader per broker once the controller spreads them), ``default.replication.factor=3``,
``min.insync.replicas=2``, ``offsets.topic.replication.factor=3`` with 3 partitions. A peer's
``cpu()`` and ``rss()`` sum its 3 brokers ("cluster" figures); kctl's ZooKeeper is not a broker and is
reported on its own lines (Kafka's controllers run inside its brokers, so theirs are in the sums).
``leaders(topic)`` asks the cluster's metadata where each partition's leader is, so the raw load
generator sends every partition's requests to its leader."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from .brokers import (
    QUIET,
    Peer,
    Unavailable,
    free_port,
    kafka_command,
    kafka_format,
    kafka_jars,
    new_cluster_id,
    process_cpu,
    process_rss,
)

BROKERS = 3
PARTITIONS = 3
MIN_INSYNC_REPLICAS = 2
SHARED = {  # broker properties both systems get, same names in both
    "num.partitions": str(PARTITIONS),
    "default.replication.factor": str(BROKERS),
    "min.insync.replicas": str(MIN_INSYNC_REPLICAS),
    "offsets.topic.replication.factor": str(BROKERS),
    "offsets.topic.num.partitions": str(PARTITIONS),
    "group.initial.rebalance.delay.ms": "0",
}


def pin(pids: list[int], cores: list[int] | None) -> None:
    """Every thread of ``pids`` to ``cores`` (threads started later inherit it from their creator)."""
    if not cores:
        return
    for pid in pids:
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task), cores)


class ClusterPeer(Peer):
    """A cluster of ``BROKERS`` broker processes (``processes``); its figures are their sums."""

    partitions = PARTITIONS
    replication_factor = BROKERS
    acks = -1
    topic_configs = {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)}  # noqa: RUF012 - read only
    scope = "cluster"
    processes: list[subprocess.Popen[bytes]]

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def _check_alive(self) -> None:
        for index, process in enumerate(self.processes):
            if process.poll() is not None:
                log = self.logs()[index].read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{self.name}: broker {index + 1} exited: {log}")

    def leaders(self, topic: str) -> dict[int, tuple[str, int]]:
        """Each partition's leader from a Metadata request (retried until all have one)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        deadline = time.monotonic() + 60
        while True:
            metadata = admin.list_topics(topic, timeout=10)
            brokers = {b.id: (str(b.host), int(b.port)) for b in metadata.brokers.values()}
            found = metadata.topics.get(topic)
            partitions = found.partitions if found is not None and found.error is None else {}
            leaders = {p: brokers[m.leader] for p, m in partitions.items() if m.leader in brokers}
            if len(leaders) == self.partitions:
                return leaders
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: {topic} has leaders for {sorted(leaders)} only")
            time.sleep(0.1)

    def in_sync(self, topic: str) -> dict[int, int]:
        """The ISR size of each partition of ``topic`` (Metadata)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        found = admin.list_topics(topic, timeout=10).topics[topic]
        return {p: len(m.isrs) for p, m in found.partitions.items()}

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                print(f"#   {self.name}: a broker did not stop within 60 s of SIGTERM; killed", flush=True)
                process.kill()
                process.wait()
        shutil.rmtree(self.base / "data", ignore_errors=True)


class KctlClusterPeer(ClusterPeer):
    """kctl in ZooKeeper mode: ``LocalCluster(size=3)`` (its own ZooKeeper server and chroot)."""

    name = "kctl"

    def __init__(self, base: Path, cores: list[int] | None, *, tree: Path | None = None) -> None:
        """``tree``: kctl from another source tree (a baseline)."""
        env = None
        if tree is not None:
            self.name = "kctl-baseline"
            env = {"PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
        super().__init__(base, cores, env)
        self.processes = []

    def start(self) -> None:
        from kctl.localcluster import LocalCluster
        from kctl.localcluster.zookeeper import ZooKeeperUnavailableError

        try:
            self.cluster = LocalCluster(self.base, BROKERS, properties=SHARED, broker_env=self.env)
        except ZooKeeperUnavailableError as error:
            raise Unavailable(str(error)) from error
        self.cluster.start()
        self.processes = [b.process for b in self.cluster.brokers.values() if b.process is not None]
        assert self.cluster.zookeeper.process is not None
        pin([*self.pids(), self.cluster.zookeeper.process.pid], self.cores)
        first = self.cluster.broker(1)
        self.address = (first.host, first.port)
        self.bootstrap = self.cluster.bootstrap_servers
        self._wait_ready(BROKERS)

    def logs(self) -> list[Path]:
        return [broker.log_file for broker in self.cluster.brokers.values()]

    def extra_figures(self) -> dict[str, float]:
        process = self.cluster.zookeeper.process
        if process is None or process.poll() is not None:
            return {}
        now, _ = process_rss(process.pid)
        return {"ZooKeeper RSS MB": now, "ZooKeeper CPU s, whole run": process_cpu(process.pid)}

    def stop(self) -> None:
        self.cluster.stop()  # brokers (SIGTERM, controlled shutdown), then ZooKeeper
        for broker in self.cluster.brokers.values():  # the logs stay (read for errors after the run)
            shutil.rmtree(broker.data_dir, ignore_errors=True)
        shutil.rmtree(self.cluster.zookeeper.data_dir, ignore_errors=True)


_KAFKA_NODE = """process.roles=broker,controller
node.id={node}
controller.quorum.voters={voters}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs={data}
transaction.state.log.replication.factor={brokers}
transaction.state.log.min.isr={min_insync}
auto.create.topics.enable=true
"""


class KafkaClusterPeer(ClusterPeer):
    """Apache Kafka 3.9: 3 KRaft nodes, each broker and controller, the single-node peer's JVM flags."""

    name = "kafka"

    def __init__(
        self, base: Path, cores: list[int] | None, *, properties: dict[str, str] | None = None
    ) -> None:
        """``properties``: broker properties added to `SHARED` (bench_availability's timeouts)."""
        super().__init__(base, cores)
        self.processes = []
        self.extra = dict(properties or {})

    def start(self) -> None:
        libs = kafka_jars()
        ports = [free_port() for _ in range(BROKERS)]
        controllers = [free_port() for _ in range(BROKERS)]
        voters = ",".join(f"{n + 1}@127.0.0.1:{c}" for n, c in enumerate(controllers))
        cluster_id = new_cluster_id()
        for node in range(BROKERS):
            directory = self.base / f"node-{node + 1}"
            directory.mkdir()
            properties = directory / "server.properties"
            text = _KAFKA_NODE.format(
                node=node + 1,
                voters=voters,
                port=ports[node],
                controller=controllers[node],
                data=self.base / "data" / f"node-{node + 1}",
                brokers=BROKERS,
                min_insync=MIN_INSYNC_REPLICAS,
            )
            settings = {**SHARED, **self.extra}
            properties.write_text(text + "".join(f"{k}={v}\n" for k, v in settings.items()))
            kafka_format(properties, cluster_id)
        self.libs = libs
        self.processes = [self._spawn(node) for node in range(BROKERS)]
        self.address = ("127.0.0.1", ports[0])
        self.bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports)
        self._wait_ready(BROKERS)

    def _spawn(self, node: int) -> subprocess.Popen[bytes]:
        properties = self.base / f"node-{node + 1}" / "server.properties"
        with open(self.logs()[node], "ab") as stderr:
            return subprocess.Popen(
                kafka_command(self.libs, properties, self.cores), stdout=subprocess.DEVNULL, stderr=stderr
            )

    def restart_node(self, node_id: int) -> None:
        """Start node ``node_id`` (1-based) again on its log directory, once its process has ended."""
        process = self.processes[node_id - 1]
        if process.poll() is None:
            raise RuntimeError(f"kafka node {node_id} is still running")
        self.processes[node_id - 1] = self._spawn(node_id - 1)

    def logs(self) -> list[Path]:
        return [self.base / f"node-{node + 1}" / "stderr.log" for node in range(BROKERS)]

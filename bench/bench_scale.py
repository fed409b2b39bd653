#!/usr/bin/env python3
"""Metadata and partitions at scale on 3 brokers (issue 29 §1b): kctl (a ZooKeeper-mode LocalCluster) beside
Apache Kafka 3.9 (3 KRaft nodes, broker and controller each), both from the peer harness
(bench/peers/cluster.py), one system after the other. Prints each figure per system and the ratio.
Asserts nothing.

1. **CreateTopics**: one request creating 100 topics of 3 partitions, replication factor 3
   (confluent-kafka's AdminClient): the time until it is answered, and until every broker's Metadata
   shows every new partition with a leader.
2. **Grow** to ``--partitions`` partitions with replication factor 3 (so every broker hosts that many
   replicas), in CreateTopics requests of 20 topics of 50 partitions.
3. **Idle CPU**: each system's brokers' CPU over ``--idle`` seconds with nothing produced or fetched,
   in % of one core per broker.
4. **Metadata latency**: a Metadata request for one topic, 30 times, to each broker (p50, p99 ms); and
   one for every topic, 5 times (p50; the client's own parsing of the answer is included, alike for both).
   Each client is warmed up first, by two requests `WARM_UP_PAUSE_S` apart: librdkafka retires its
   bootstrap connection on the first answer and holds back the next connection for about 50 ms, so
   a second request sent at once waited about 50 ms in the client (the p99 of earlier runs; against a
   broker whose first answer took longer than that it did not, so the figure favoured the slower one).
5. **Controller failover**: SIGKILL the controller (kctl: the broker holding ``/controller``; Kafka: the
   active KRaft controller, a broker too); the time until every partition has a live leader again,
   measured from another broker's Metadata; and split in two: until another broker is named
   controller (its DescribeCluster), and from then until every partition is led. The killed broker
   is then started again. Both systems keep their default failure detection: kctl's ZooKeeper
   session of 18 s (``zookeeper.session.timeout.ms``, Kafka's ZooKeeper-mode default), Kafka KRaft's
   ``broker.session.timeout.ms`` of 9 s (its controllers elect a new active one within about a
   second; the dead broker's partitions move when its session expires). Every-partition Metadata is
   polled every `WHOLE_METADATA_POLL_S` (0.5 s) here and in the cold start: the figures are that
   coarse, alike for both systems.
6. **Cold start**: every broker stopped (SIGTERM), then all started at once; the time until every
   partition has a leader, and until every partition's ISR is full.

Usage: python bench/bench_scale.py [--partitions 10000] [--idle 20] [--peers kctl,kafka]"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from peers.brokers import QUIET, Unavailable, kafka_command, kafka_jars
from peers.cluster import BROKERS, ClusterPeer, KafkaClusterPeer, KctlClusterPeer

TOPICS_PER_REQUEST = 20
PARTITIONS_PER_TOPIC = 50
DEADLINE_S = 600.0
WARM_UP_PAUSE_S = 0.2  # longer than librdkafka's ~50 ms hold on a new connection after bootstrap
WHOLE_METADATA_POLL_S = 0.5
"""How often failover and cold start ask for the Metadata of every partition: an answer naming
10,000 partitions is tens of milliseconds of a broker's work, and asked every 50 ms it took half of
the answering broker's time while it was electing leaders."""
STOP_TIMEOUT_S = 120.0  # a clean stop of a broker hosting 10,000 partitions (Kafka's processes get as long)


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, **QUIET, "log_level": 2})


def led_partitions(client: Any, prefix: str, dead: frozenset[int] = frozenset()) -> tuple[int, int, int]:
    """(partitions of topics named ``prefix``*, those with a live leader, those with a full ISR)."""
    metadata = client.list_topics(timeout=60)
    total = led = full = 0
    for name, topic in metadata.topics.items():
        if not name.startswith(prefix):
            continue
        for partition in topic.partitions.values():
            total += 1
            if partition.leader >= 0 and partition.leader not in dead:
                led += 1
            if len(partition.isrs) == BROKERS:
                full += 1
    return total, led, full


def poll_until(
    what: str, check: Callable[[], bool], deadline_s: float = DEADLINE_S, interval_s: float = 0.05
) -> float:
    """Seconds until ``check()`` holds (polled every ``interval_s``); raises after ``deadline_s``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > deadline_s:
            raise TimeoutError(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(interval_s)  # polling a condition, bounded by the deadline
    return time.monotonic() - started


def create_topics(bootstrap: str, names: list[str], partitions: int) -> float:
    """One CreateTopics request; the seconds until it is answered (every topic created)."""
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)  # kept: the futures fail if the client goes first
    started = time.monotonic()
    futures = client.create_topics(
        [NewTopic(name, partitions, BROKERS) for name in names], operation_timeout=120, request_timeout=180
    )
    for future in futures.values():
        future.result(300)
    return time.monotonic() - started


def broker_addresses(peer: ClusterPeer) -> list[str]:
    return peer.bootstrap.split(",")


def measure_create(peer: ClusterPeer) -> dict[str, float]:
    names = [f"c-{index}" for index in range(100)]
    started = time.monotonic()
    answered = create_topics(peer.bootstrap, names, 3)
    clients = [admin(address) for address in broker_addresses(peer)]

    def everywhere() -> bool:
        return all(led_partitions(client, "c-")[1] == 300 for client in clients)

    poll_until("100 topics led on every broker", everywhere)
    return {
        "CreateTopics 100 x 3, RF 3: answered s": answered,
        "CreateTopics 100 x 3, RF 3: led on every broker s": time.monotonic() - started,
    }


def grow(peer: ClusterPeer, partitions: int) -> dict[str, float]:
    started = time.monotonic()
    created = 0
    batch = 0
    while created < partitions:
        count = min(TOPICS_PER_REQUEST, -(-(partitions - created) // PARTITIONS_PER_TOPIC))
        create_topics(peer.bootstrap, [f"s-{batch}-{i}" for i in range(count)], PARTITIONS_PER_TOPIC)
        created += count * PARTITIONS_PER_TOPIC
        batch += 1
    client = admin(peer.bootstrap)
    poll_until(f"{created} partitions led", lambda: led_partitions(client, "s-")[1] == created)
    return {f"create {created} partitions (RF 3) s": time.monotonic() - started}


def idle_cpu(peer: ClusterPeer, seconds: float) -> dict[str, float]:
    before = peer.cpu()
    time.sleep(seconds)  # the measurement window itself: nothing runs, the brokers' CPU is read around it
    return {"idle CPU % of a core per broker": 100 * (peer.cpu() - before) / seconds / BROKERS}


def metadata_latency(peer: ClusterPeer) -> dict[str, float]:
    one: list[float] = []
    every: list[float] = []
    for address in broker_addresses(peer):
        client = admin(address)
        client.list_topics("c-0", timeout=30)  # connected; librdkafka then retires the bootstrap connection
        time.sleep(WARM_UP_PAUSE_S)  # ... and holds back the new one for about 50 ms: a client-side wait
        client.list_topics("c-0", timeout=30)  # connected to the broker as the metadata names it
        for _ in range(30):
            started = time.perf_counter()
            client.list_topics("c-0", timeout=30)
            one.append(1000 * (time.perf_counter() - started))
        for _ in range(5):
            started = time.perf_counter()
            client.list_topics(timeout=60)
            every.append(1000 * (time.perf_counter() - started))
    one.sort()
    return {
        "Metadata, one topic: p50 ms": statistics.median(one),
        "Metadata, one topic: p99 ms": one[min(len(one) - 1, int(0.99 * len(one)))],
        "Metadata, every topic: p50 ms": statistics.median(every),
    }


class Control:
    """Kill, stop and start one broker of a peer (kctl's LocalCluster or Kafka's processes)."""

    def __init__(self, peer: ClusterPeer) -> None:
        self.peer = peer

    def controller(self) -> int:
        client = admin(self.peer.bootstrap)  # kept until the answer is in
        return int(client.describe_cluster(request_timeout=30).result(60).controller.id)

    def kill(self, broker_id: int) -> None:
        if isinstance(self.peer, KctlClusterPeer):
            self.peer.cluster.kill(broker_id)
        else:
            process = self.peer.processes[broker_id - 1]
            process.kill()
            process.wait(60)

    def stop_all(self) -> None:
        if isinstance(self.peer, KctlClusterPeer):
            threads = [
                threading.Thread(target=b.stop, kwargs={"timeout": STOP_TIMEOUT_S})
                for b in self.peer.cluster.brokers.values()
            ]
        else:
            threads = [threading.Thread(target=_terminate, args=(p,)) for p in self.peer.processes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def start(self, broker_ids: list[int]) -> None:
        """Start these brokers at once (threads: kctl's start waits until each one listens)."""
        if isinstance(self.peer, KctlClusterPeer):
            cluster = self.peer.cluster
            threads = [threading.Thread(target=cluster.broker(i).start) for i in broker_ids]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            self.peer.processes = [b.process for b in cluster.brokers.values() if b.process is not None]
            return
        libs = kafka_jars()
        for broker_id in broker_ids:
            properties = self.peer.base / f"node-{broker_id}" / "server.properties"
            with open(self.peer.logs()[broker_id - 1], "ab") as stderr:
                self.peer.processes[broker_id - 1] = subprocess.Popen(
                    kafka_command(libs, properties, self.peer.cores), stdout=subprocess.DEVNULL, stderr=stderr
                )


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def failover(peer: ClusterPeer, partitions: int) -> dict[str, float]:
    """SIGKILL the controller; seconds until another broker is named controller (a survivor's
    DescribeCluster), and until every partition has a live leader again (from the kill)."""
    control = Control(peer)
    victim = control.controller()
    survivor = next(a for i, a in enumerate(broker_addresses(peer), start=1) if i != victim)
    client = admin(survivor)
    elected: list[float] = []
    done = threading.Event()

    def watch_controller() -> None:
        while not done.is_set():
            with contextlib.suppress(Exception):
                controller = client.describe_cluster(request_timeout=5).result(10).controller
                if controller is not None and controller.id not in (victim, -1):
                    elected.append(time.monotonic())
                    return
            done.wait(0.1)

    control.kill(victim)
    killed = time.monotonic()
    watcher = threading.Thread(target=watch_controller, daemon=True)
    watcher.start()
    took = poll_until(
        "every partition led after the controller's death",
        lambda: led_partitions(client, "s-", frozenset({victim}))[1] == partitions,
        interval_s=WHOLE_METADATA_POLL_S,
    )
    done.set()
    watcher.join(15)
    control.start([victim])
    poll_until("full ISR again", lambda: led_partitions(client, "s-")[2] == partitions)
    figures = {f"controller (broker {victim}) killed: every partition led again s": took}
    if elected:
        new_controller = elected[0] - killed
        figures["controller killed: another broker named controller s"] = new_controller
        figures["new controller named: every partition led again s"] = max(0.0, took - new_controller)
    return figures


def cold_start(peer: ClusterPeer, partitions: int) -> dict[str, float]:
    control = Control(peer)
    control.stop_all()
    started = time.monotonic()
    control.start(list(range(1, BROKERS + 1)))
    client = admin(peer.bootstrap)

    def counts() -> tuple[int, int, int]:
        try:
            return led_partitions(client, "s-")
        except Exception:  # no broker answers yet
            return 0, 0, 0

    poll_until(
        "every partition led after a cold start",
        lambda: counts()[1] == partitions,
        interval_s=WHOLE_METADATA_POLL_S,
    )
    led = time.monotonic() - started
    poll_until(
        "every ISR full after a cold start",
        lambda: counts()[2] == partitions,
        interval_s=WHOLE_METADATA_POLL_S,
    )
    return {
        "cold start: every partition led s": led,
        "cold start: every ISR full s": time.monotonic() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--partitions", type=int, default=10000, help="partitions (RF 3: replicas per broker)"
    )
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of the idle CPU measurement")
    parser.add_argument("--peers", default="kctl,kafka")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    results: dict[str, dict[str, float]] = {}
    print(f"# bench_scale: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    try:
        for name in args.peers.split(","):
            peer: ClusterPeer = (KctlClusterPeer if name == "kctl" else KafkaClusterPeer)(base, None)
            try:
                peer.start()
            except Unavailable as why:
                print(f"# {name}: skipped: {why}", flush=True)
                continue
            figures: dict[str, float] = {}
            try:
                for step in (
                    measure_create,
                    lambda p: grow(p, args.partitions),
                    lambda p: idle_cpu(p, args.idle),
                    metadata_latency,
                    lambda p: failover(p, args.partitions),
                    lambda p: cold_start(p, args.partitions),
                ):
                    figures.update(step(peer))
                    print(f"# {name}: {figures}", flush=True)
            except Exception as error:  # what was measured is still printed
                print(f"# {name}: stopped: {error!r}", flush=True)
            finally:
                with contextlib.suppress(Exception):
                    peer.stop()
            results[name] = figures
    finally:
        shutil.rmtree(base, ignore_errors=True)
    names = list(results)
    print(f"\n# load average at the end: {os.getloadavg()[0]:.2f}")
    print("| figure | " + " | ".join(names) + (" | kctl/kafka |" if len(names) == 2 else " |"))
    print("|" + " --- |" * (len(names) + 1 + (len(names) == 2)))
    metrics = list(dict.fromkeys(m for figures in results.values() for m in figures))
    for metric in metrics:
        cells = [f"{results[n].get(metric, float('nan')):.3f}" for n in names]
        if len(names) == 2:
            ours, theirs = (results[n].get(metric, float("nan")) for n in names)
            cells.append(f"{ours / theirs:.2f}x" if theirs else "-")
        print(f"| {metric} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

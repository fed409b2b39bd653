"""Helpers the ZooKeeper-mode consumer tests share (tests/zk/test_zk_consumer.py, test_zk_consumer_kill.py,
tests/cli/test_cli_zk.py): a broker registered in a fresh ZooKeeper chroot (`ZkCluster`, fixture `zk_cluster`)
and ZooKeeper-mode consumers polling in threads (`Runner`, fixture `runners`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from kctl.client import TopicPartition
from kctl.client.zkgroup import ZkGroupConsumer
from kctl.testing import create_topic, produce, wait_for
from kctl.zk.consumer_registry import ConsumerRegistry

if TYPE_CHECKING:  # only annotations: the unit tests of the modules importing this stay unmarked (no e2e/zk)
    from kctl.testing import BrokerProcess, ZooKeeperServer

Record = tuple[float, str, TopicPartition, int]
"""(monotonic time received, consumer id, partition, offset)."""


class ZkCluster:
    """A broker registered in a fresh ZooKeeper chroot, and helpers to make topics and records."""

    def __init__(self, broker: BrokerProcess, connect: str) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.connect = connect

    def create_topic(self, name: str, partitions: int) -> None:
        create_topic(self.bootstrap, name, partitions)
        with self.registry() as zk:
            wait_for(lambda: zk.partitions(name), f"topic {name} in ZooKeeper", 10)

    def produce(self, topic: str, partitions: int, count: int, start: int = 0) -> None:
        numbers = range(start, start + count)
        values, targets = [f"v{i}" for i in numbers], [i % partitions for i in numbers]
        produce(self.bootstrap, topic, values, partition=targets)

    def consumer_config(self, group: str, **extra: str) -> dict[str, str]:
        return {
            "group.id": group,
            "zookeeper.connect": self.connect,
            "zookeeper.session.timeout.ms": "10000",  # no test here kills a consumer
            "auto.offset.reset": "smallest",
            "rebalance.backoff.ms": "200",
            "rebalance.max.retries": "50",
            "auto.commit.interval.ms": "200",
            "fetch.max.wait.ms": "100",
            **extra,
        }

    def registry(self) -> ConsumerRegistry:
        return ConsumerRegistry(self.connect, session_timeout_ms=10_000).start()


@pytest.fixture
def zk_cluster(zookeeper: ZooKeeperServer, broker_factory: Callable[..., BrokerProcess]) -> ZkCluster:
    connect = zookeeper.connect_string()
    broker = broker_factory(
        {
            "zookeeper.connect": connect,
            "zookeeper.session.timeout.ms": "6000",
            "offsets.topic.replication.factor": "1",  # a cluster of one broker, as Kafka's dev configs
        }
    )
    return ZkCluster(broker, connect)


class Runner(threading.Thread):
    """One ZooKeeper-mode consumer polling in a thread of its own until ``stop()``."""

    def __init__(
        self, cluster: ZkCluster, group: str, topics: list[str] | None = None, **config: Any
    ) -> None:
        super().__init__(daemon=True)
        pattern = config.pop("pattern", None)
        self.consumer = ZkGroupConsumer(cluster.bootstrap, cluster.consumer_config(group, **config))
        if pattern is not None:
            self.consumer.subscribe(pattern=pattern)
        else:
            self.consumer.subscribe(topics)
        self.records: list[Record] = []
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self.start()

    @property
    def consumer_id(self) -> str:
        return self.consumer.consumer_id

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                for r in self.consumer.poll(0.2):
                    self.records.append(
                        (time.monotonic(), self.consumer_id, TopicPartition(r.topic, r.partition), r.offset)
                    )
        except BaseException as error:
            self.error = error
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        assert not self.is_alive(), "the consumer did not stop"
        assert self.error is None, self.error


@pytest.fixture
def runners() -> Iterator[list[Runner]]:
    started: list[Runner] = []
    yield started
    for runner in started:
        runner._halt.set()
    for runner in started:
        runner.join(30)

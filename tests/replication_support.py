"""Broker 1's side of a three-replica partition, in process: an embedded registry holding brokers 1, 2
and 3 and topic ``t`` (one partition, replicas 1, 2, 3) in a given state, and broker 1's log manager
— what the replica manager tests build their ReplicaManager on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kctl.common.topic_partition import TopicPartition
from kctl.log.manager import LogManager
from kctl.zk.embedded import EmbeddedRegistry
from kctl.zk.model import BrokerRegistration, PartitionState

TP = TopicPartition("t", 0)


@contextmanager
def three_replicas(
    tmp_path: Path, state: PartitionState, registry_class: type[EmbeddedRegistry] = EmbeddedRegistry
) -> Iterator[tuple[EmbeddedRegistry, LogManager]]:
    """(registry, broker 1's log manager), both closed on exit."""
    registry = registry_class(tmp_path / "meta")
    registry.start()
    logs = LogManager([tmp_path / "logs"], broker_id=1, high_watermark_follows_log_end=False)
    try:
        for broker_id in (1, 2, 3):
            registry.register_broker(BrokerRegistration(broker_id, "127.0.0.1", 9090 + broker_id))
        registry.create_topic(TP.topic, {TP.partition: (1, 2, 3)}, {})
        registry.set_partition_state(TP.topic, TP.partition, state)
        yield registry, logs
    finally:
        logs.close()
        registry.close()

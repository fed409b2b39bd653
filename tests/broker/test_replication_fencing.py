"""Zombie fencing (decision 6) and leader epoch checks, on an in-process broker against a real
ZooKeeper: when the broker's session expires it stops leading at once (NOT_LEADER_OR_FOLLOWER) until
it has registered again in a new session and re-read the partition states; requests carrying an older
leader epoch are FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kctl.broker.broker import Broker
from kctl.broker.config import BrokerConfig
from kctl.broker.errors import ApiError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import ErrorCode
from kctl.records.builder import RecordBatchBuilder
from kctl.testing import ZooKeeperServer
from kctl.testing.zk_sessions import expire_session
from kctl.zk.model import PartitionState


async def _eventually(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_session_expiry_fences_leadership_until_registered_again(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    async def scenario() -> list[str]:
        config = BrokerConfig(
            {
                "broker.id": "1",
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(tmp_path / "data"),
                "zookeeper.connect": zookeeper.connect_string(),
                "zookeeper.session.timeout.ms": "6000",
            }
        )
        broker = Broker(config)
        await broker.start()
        events: list[str] = []
        replicas = broker.replicas
        fence, unfence = replicas.fence, replicas.unfence

        def recording_fence() -> None:
            events.append("fenced")
            fence()

        def recording_unfence() -> None:
            if replicas.fenced:
                events.append("unfenced")
            unfence()

        replicas.fence = recording_fence  # type: ignore[method-assign]
        replicas.unfence = recording_unfence  # type: ignore[method-assign]
        try:
            broker.topics.create_topic("fenced", 1, 1)
            broker.on_metadata_changed()
            tp = TopicPartition("fenced", 0)
            partition = replicas.leader_partition(tp)
            assert broker.registry is not None
            state = broker.registry.partition_states("fenced")[0]
            broker.registry.set_partition_state(  # a new epoch, as the controller would write it
                "fenced",
                0,
                PartitionState(1, state.leader_epoch + 1, (1,), state.controller_epoch),
                expected_partition_epoch=state.partition_epoch,
            )
            epoch = state.leader_epoch + 1
            await _eventually(lambda: partition.leader_epoch == epoch, 10, "the new leader epoch")
            assert replicas.leader_partition(tp, epoch) is partition
            with pytest.raises(ApiError) as older:
                replicas.leader_partition(tp, epoch - 1)
            assert older.value.code == ErrorCode.FENCED_LEADER_EPOCH
            with pytest.raises(ApiError) as newer:
                replicas.leader_partition(tp, epoch + 1)
            assert newer.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH

            client_id = broker.registry.kazoo_client.client_id  # type: ignore[attr-defined]
            await asyncio.to_thread(expire_session, zookeeper.hosts, client_id, lambda: "fenced" in events)
            await _eventually(lambda: "fenced" in events, 20, "the broker to fence itself")
            await _eventually(lambda: "unfenced" in events, 30, "the broker to register again")
            assert replicas.leader_partition(tp) is partition
            assert any(b.broker_id == 1 for b in broker.metadata.brokers())
        finally:
            await broker.stop()
        return events

    assert asyncio.run(scenario()) == ["fenced", "unfenced"]


def test_a_fenced_broker_answers_not_leader(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    async def scenario() -> tuple[int, int]:
        config = BrokerConfig(
            {
                "broker.id": "1",
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(tmp_path / "data"),
                "zookeeper.connect": zookeeper.connect_string(),
            }
        )
        broker = Broker(config)
        await broker.start()
        try:
            broker.topics.create_topic("zombie", 1, 1)
            broker.on_metadata_changed()
            tp = TopicPartition("zombie", 0)
            broker.replicas.append(tp, _batch())
            waiting = asyncio.ensure_future(broker.replicas.wait_for_replication(tp, 10, 5.0))
            await asyncio.sleep(0)
            broker.replicas.fence()
            parked = await waiting
            with pytest.raises(ApiError) as refused:
                broker.replicas.append(tp, _batch())
            return parked, refused.value.code
        finally:
            await broker.stop()

    assert asyncio.run(scenario()) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def _batch() -> bytes:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), None, b"x")
    return builder.build()

"""A broker starting on ZooKeeper knows the cluster's topics before it answers any request.

Found by bench_jepsen's 300-fault mixed campaign (seed 25): 1,169 acks=all writes of confluent-kafka
failed for good with INVALID_REPLICATION_FACTOR. A broker restarted after a fault listened before it had
read the metadata: a Produce to an existing topic found no such topic in the empty cache, tried to
auto-create it, and answered the creation's error ("not enough live brokers": none were known yet),
which librdkafka takes as final. Kafka processes no request before its start-up is done. Here, on an
in-process broker against a real ZooKeeper, the registration is held back (as a slow or cut ZooKeeper
holds it) while a Produce arrives."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kctl.broker.broker import Broker
from kctl.broker.config import BrokerConfig
from kctl.protocol.errors import ErrorCode
from kctl.testing import ZooKeeperServer
from kctl.testing.cluster_clients import raw_produce
from kctl.zk import open_registry


def _config(broker_id: int, data: Path, connect: str) -> BrokerConfig:
    return BrokerConfig(
        {
            "broker.id": str(broker_id),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data),
            "zookeeper.connect": connect,
            "zookeeper.session.timeout.ms": "6000",
        }
    )


def test_a_starting_broker_answers_a_produce_to_a_known_topic_with_a_retriable_error(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    connect = zookeeper.connect_string()

    async def scenario() -> tuple[int, set[str]]:
        first = Broker(_config(1, tmp_path / "one", connect))
        await first.start()
        try:
            first.topics.create_topic("known", 1, 1)
        finally:
            await first.stop()
        registry: Any = open_registry(connect, tmp_path / "two", session_timeout_ms=6000)
        registry.start()
        registered = threading.Event()
        release = threading.Event()
        register_broker = registry.register_broker

        def held_register(registration: Any) -> None:
            registered.set()
            release.wait(30)
            register_broker(registration)

        registry.register_broker = held_register
        second = Broker(_config(2, tmp_path / "two", connect), registry=registry)
        starting = asyncio.create_task(second.start())
        try:
            deadline = time.monotonic() + 30
            while not registered.is_set():  # listening, and registering
                if starting.done() or time.monotonic() > deadline:
                    pytest.fail("the broker never got to its registration")
                await asyncio.sleep(0.02)
            address = second.bootstrap_addresses[0]
            code, _ = await asyncio.to_thread(raw_produce, address, "known", 0, ["x"], timeout_ms=1000)
        finally:
            release.set()
            await starting
        try:
            return code, set(second.registry.topics())
        finally:
            await second.stop()

    code, topics = asyncio.run(scenario())
    assert code != ErrorCode.INVALID_REPLICATION_FACTOR
    assert code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ErrorCode(
        code
    ).name
    assert topics == {"known"}

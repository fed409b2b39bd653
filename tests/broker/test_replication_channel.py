"""The inter-broker channel against a real in-process broker: ApiVersions on connect, requests
matched to responses by correlation id (several in flight), failures reported as ChannelError,
reconnection after the peer went away, and backoff between failed connection attempts; and, on the
server's side, a request parked in its handler is cancelled when its connection closes."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

import kctl.protocol as kp
from kctl.broker.broker import Broker
from kctl.broker.config import BrokerConfig
from kctl.broker.replication.channel import BrokerChannel, ChannelError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.protocol.messages.metadata import MetadataRequest
from kctl.protocol.registry import ApiKey


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_requests_reconnection_and_errors(tmp_path: Path) -> None:
    port = _free_port()

    async def scenario() -> None:
        config = BrokerConfig(
            {"broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path / "d")}
        )
        broker = Broker(config)
        await broker.start()
        channel = BrokerChannel(0, "127.0.0.1", port, request_timeout=5, backoff=0.2, max_backoff=0.4)
        try:
            answers = await asyncio.gather(
                *(channel.request(ApiKey.METADATA, 1, MetadataRequest(topics=None)) for _ in range(5))
            )
            assert all(a.brokers[0].port == port for a in answers)
            assert ApiKey.FETCH in channel.versions
            with pytest.raises(ChannelError):
                await channel.request(ApiKey.METADATA, 99, MetadataRequest(topics=None))

            await broker.stop()
            with pytest.raises(ChannelError):
                await channel.request(ApiKey.METADATA, 1, MetadataRequest(topics=None))
            started = time.monotonic()
            with pytest.raises(ChannelError):  # refused, after the backoff
                await channel.request(ApiKey.METADATA, 1, MetadataRequest(topics=None))
            assert time.monotonic() - started >= 0.15

            broker = Broker(config)  # back on the same port: the channel reconnects
            await broker.start()
            answer = await channel.request(ApiKey.METADATA, 1, MetadataRequest(topics=None))
            assert answer.brokers[0].node_id == 0
        finally:
            await channel.close()
            await broker.stop()

    asyncio.run(scenario())


def test_a_parked_fetch_is_cancelled_when_its_connection_closes(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int]:
        config = BrokerConfig(
            {"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "d")}
        )
        broker = Broker(config)
        await broker.start()
        try:
            broker.topics.create_topic("parked", 1, 1)
            broker.on_metadata_changed()
            partition = broker.replicas.partitions[TopicPartition("parked", 0)]
            host, port = broker.bootstrap_addresses[0].split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=60_000,
                min_bytes=1,
                max_bytes=1024,
                isolation_level=0,
                topics=[
                    FetchTopic(
                        topic="parked",
                        partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)],
                    )
                ],
            )
            writer.write(kp.encode_request(kp.RequestHeader(ApiKey.FETCH, 4, 1, "parked"), request))
            await writer.drain()
            deadline = time.monotonic() + 10
            while not partition.parked_fetches and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            parked = partition.parked_fetches
            writer.close()
            while partition.parked_fetches and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            del reader
            return parked, partition.parked_fetches
        finally:
            await broker.stop()

    assert asyncio.run(scenario()) == (1, 0)


def test_fetchers_follow_a_source_broker_to_its_new_address(tmp_path: Path) -> None:
    """A leader that comes back on another port is fetched there (issue 23 §6): after a metadata
    refresh the fetcher manager points each fetcher's channel at the registered address."""
    from kctl.broker.replication.fetcher import FetcherSettings, ReplicaFetcher, ReplicaFetcherManager

    old_port, new_port = _free_port(), _free_port()

    def config(port: int) -> BrokerConfig:
        return BrokerConfig(
            {"broker.id": "7", "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path / "d")}
        )

    async def scenario() -> None:
        broker = Broker(config(old_port))
        await broker.start()
        channel = BrokerChannel(7, "127.0.0.1", old_port, request_timeout=5, backoff=0.05, max_backoff=0.1)
        manager = ReplicaFetcherManager(FetcherSettings(broker_id=1), lambda source: channel)
        manager.fetchers[7] = ReplicaFetcher(7, channel, manager.settings)  # not started: no partitions
        addresses = {7: ("127.0.0.1", old_port)}
        try:
            answer = await channel.request(ApiKey.METADATA, 1, MetadataRequest(topics=None))
            assert answer.brokers[0].port == old_port
            await broker.stop()
            broker = Broker(config(new_port))  # the same broker, back on another port
            await broker.start()
            manager.retarget(addresses.get)  # registered still at the old address: nothing moves
            with pytest.raises(ChannelError):
                await channel.request(ApiKey.METADATA, 1, MetadataRequest(topics=None))
            addresses[7] = ("127.0.0.1", new_port)
            manager.retarget(addresses.get)
            answer = await channel.request(ApiKey.METADATA, 1, MetadataRequest(topics=None))
            assert answer.brokers[0].port == new_port
        finally:
            await channel.close()
            await broker.stop()

    asyncio.run(scenario())

"""What keeps a broker in controlled shutdown out of the ISRs and lets its process end, without a
network: a leader never takes a broker that asked for a controlled shutdown back into an ISR (whether
its metadata cache knows of the request or only the registry does yet); a closed fetcher manager
starts no fetcher for a metadata change arriving afterwards; and an inter-broker request cancelled as
its answer arrives is cancelled (Python 3.11's ``asyncio.wait_for`` returned the answer instead, so
a replica fetcher being closed went on fetching and the broker never exited)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from replication_support import TP, three_replicas

from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.partition import Partition
from kctl.broker.replica_manager import ReplicaManager
from kctl.broker.replication.channel import BrokerChannel
from kctl.broker.replication.fetcher import FetcherSettings, ReplicaFetcherManager
from kctl.log.manager import LogManager
from kctl.protocol.registry import ApiKey
from kctl.records.builder import RecordBatchBuilder
from kctl.zk.model import PartitionState


def _records(count: int) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    return builder.build()


async def _leader_sees_fetch(
    tmp_path: Path, *, request_before_refresh: bool, shutting_down: int | None
) -> tuple[int, ...]:
    """Broker 1 leads t-0 (replicas 1, 2, 3; ISR 1, 2); broker 3 fetches up to the log end. Returns
    the ISR stored in the registry once the leader has acted on that fetch."""
    with three_replicas(tmp_path, PartitionState(leader=1, leader_epoch=0, isr=(1, 2))) as (registry, logs):
        if shutting_down is not None and request_before_refresh:
            registry.request_controlled_shutdown(shutting_down)
        metadata = MetadataCache(registry)
        metadata.refresh()
        if shutting_down is not None and not request_before_refresh:
            registry.request_controlled_shutdown(shutting_down)  # the cache has not heard of it
        replicas = ReplicaManager(1, logs, metadata, registry=registry, replicated=True)
        replicas.sync()
        partition = replicas.partitions[TP]
        assert partition.is_leader
        replicas.append(TP, _records(3))
        end = partition.log_end_offset
        replicas.record_follower_fetch(partition, 2, end)
        replicas.record_follower_fetch(partition, 3, end)
        for _ in range(100):  # the ISR write runs in a task (and a worker thread)
            if not partition.isr_update_pending:
                break
            await asyncio.sleep(0.01)
        assert not partition.isr_update_pending
        await replicas.close()
        return registry.partition_states("t")[0].isr


def test_a_caught_up_follower_joins_the_isr(tmp_path: Path) -> None:
    isr = asyncio.run(_leader_sees_fetch(tmp_path, request_before_refresh=True, shutting_down=None))
    assert isr == (1, 2, 3)


@pytest.mark.parametrize("request_before_refresh", [True, False], ids=["cache-knows", "registry-only"])
def test_a_broker_in_controlled_shutdown_is_not_taken_back_into_the_isr(
    tmp_path: Path, request_before_refresh: bool
) -> None:
    isr = asyncio.run(
        _leader_sees_fetch(tmp_path, request_before_refresh=request_before_refresh, shutting_down=3)
    )
    assert isr == (1, 2)


def test_a_closed_fetcher_manager_starts_no_fetcher(tmp_path: Path) -> None:
    async def run() -> dict[int, Any]:
        channels: list[int] = []

        def channel_for(broker_id: int) -> BrokerChannel:
            channels.append(broker_id)
            return BrokerChannel(broker_id, "127.0.0.1", 9)

        manager = ReplicaFetcherManager(FetcherSettings(broker_id=1), channel_for)
        await manager.close()
        logs = LogManager([tmp_path], broker_id=1, high_watermark_follows_log_end=False)
        try:
            plog = logs.get_or_create_log(TP, logs.default_config)
            partition = Partition(
                TP, plog, leader_id=2, leader_epoch=0, replicas=(1, 2), isr=(1, 2), broker_id=1
            )
            manager.add_partition(partition, 2, 0)  # a metadata change heard while stopping
            assert channels == []
            return dict(manager.fetchers)
        finally:
            logs.close()

    assert asyncio.run(run()) == {}


class _Writer:
    """Stands in for a connected transport: takes the request bytes, never closes."""

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def test_a_request_cancelled_as_its_answer_arrives_is_cancelled() -> None:
    async def run() -> str:
        channel = BrokerChannel(2, "127.0.0.1", 9)
        channel._transport = _Writer()  # type: ignore[assignment]
        from kctl.protocol.messages.api_versions import ApiVersionsRequest

        task = asyncio.get_running_loop().create_task(
            channel._send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest(), 30.0)
        )
        await asyncio.sleep(0)  # the request is sent and waits for its answer
        ((_header, answer),) = channel._pending.values()
        answer.set_result("the answer")
        task.cancel()  # in the same turn of the loop: the closing fetcher's cancellation
        try:
            result = await task
        except asyncio.CancelledError:
            return "cancelled"
        return f"returned {result!r}"

    assert asyncio.run(run()) == "cancelled"

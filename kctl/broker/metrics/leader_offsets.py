"""Consumer lag in a cluster for the partitions the group coordinator does not host: a task (only while
metrics are served, in cluster mode) asks their leaders for their high watermark with ListOffsets
(latest, read-uncommitted: the high watermark) every ``interval_s`` over the inter-broker channel, and
keeps the answers for the collector. Lag of such a partition is therefore up to ``interval_s`` old;
that of a hosted partition is computed from its own high watermark at scrape time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from kctl.broker.replication.channel import BrokerChannel, ChannelError
from kctl.broker.replication.fetcher import LATEST, LIST_OFFSETS_VERSION
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.metrics.source import MetricsSource

log = logging.getLogger("kctl.broker.metrics")

INTERVAL_S = 5.0
CONSUMER = -1  # ListOffsets' replica id of a consumer: answered with the high watermark


class LeaderOffsets:
    """``high_watermarks``: what the leaders last answered for the partitions this broker's groups
    committed offsets of and this broker does not host."""

    def __init__(self, broker: MetricsSource, interval_s: float = INTERVAL_S) -> None:
        self.broker = broker
        self.interval_s = interval_s
        self.high_watermarks: dict[TopicPartition, int] = {}
        self._channels: dict[int, BrokerChannel] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kctl-metrics-leader-offsets")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()

    async def _run(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # a metric must never cost the broker anything but its own value
                log.exception("refreshing the leaders' high watermarks for consumer lag failed")
            await asyncio.sleep(self.interval_s)

    def wanted(self) -> dict[int, list[TopicPartition]]:
        """Leader id -> the committed partitions it leads that this broker does not host."""
        broker = self.broker
        groups, replicas = broker.groups, broker.replicas
        by_leader: dict[int, set[TopicPartition]] = defaultdict(set)
        for group in list(groups.groups.values()):
            for topic, index in list(group.offsets):
                tp = TopicPartition(topic, index)
                if tp in replicas.partitions:
                    continue
                state = broker.metadata.partition_state(topic, index)
                if state is not None and state.leader >= 0 and state.leader != broker.broker_id:
                    by_leader[state.leader].add(tp)
        return {leader: sorted(tps) for leader, tps in by_leader.items()}

    async def refresh(self) -> None:
        wanted = self.wanted()
        answers = await asyncio.gather(*(self._ask(leader, tps) for leader, tps in wanted.items()))
        merged: dict[TopicPartition, int] = {}
        for answer in answers:
            merged.update(answer)
        self.high_watermarks = merged

    async def _ask(self, leader: int, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        channel = self._channels.get(leader)
        if channel is None:
            channel = self.broker.channel_to(leader)
            if channel is None:
                return {}
            self._channels[leader] = channel
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in tps:
            by_topic[tp.topic].append(tp.partition)
        request = ListOffsetsRequest(
            replica_id=CONSUMER,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=LATEST)
                        for p in partitions
                    ],
                )
                for topic, partitions in by_topic.items()
            ],
        )
        try:
            response = await channel.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, request)
        except ChannelError as error:
            log.debug("ListOffsets to broker %d for consumer lag: %s", leader, error)
            del self._channels[leader]
            await channel.close()
            return {}
        return {
            TopicPartition(topic.name, answer.partition_index): int(answer.offset)
            for topic in response.topics
            for answer in topic.partitions
            if answer.error_code == 0 and answer.offset >= 0
        }

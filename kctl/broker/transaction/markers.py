"""The marker sender: once a transaction's PrepareCommit or PrepareAbort is written, the coordinator
writes a COMMIT or ABORT marker to every partition of the transaction, on that partition's current
leader, retrying until each is written.

Every marker ends in :meth:`kctl.broker.replica_manager.ReplicaManager.append_marker` on the
partition's leader: a partition this broker leads is written here directly (and, in a cluster,
waited for until replicated, as the WriteTxnMarkers handler waits); one led by another broker is
sent there as WriteTxnMarkers over the inter-broker channel, whose handler calls the same method.
The leader of each partition is read from the metadata cache before every attempt, so a leader that
moves (NOT_LEADER_OR_FOLLOWER, a broker that does not answer) is followed. A partition whose topic
was deleted is skipped. INVALID_PRODUCER_EPOCH (a newer epoch of the producer already wrote to the
partition) counts as done, as in Kafka. The sender gives up — returning False — only when the caller
says the work is no longer its own (it lost the ``__transaction_state`` partition, or was fenced by
TRANSACTION_COORDINATOR_FENCED)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kctl.broker.errors import ApiError
from kctl.broker.replication.channel import BrokerChannel, ChannelError
from kctl.common.ratelimit import RepeatedFailures
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import ErrorCode, error_name
from kctl.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.metadata_cache import MetadataCache
    from kctl.broker.replica_manager import ReplicaManager

log = logging.getLogger("kctl.broker.transaction")

RETRY_BACKOFF_S = 0.1
REPLICATION_TIMEOUT_S = 30.0  # as the WriteTxnMarkers handler (Kafka's request.timeout.ms)
MARKERS_VERSION = 1  # every kctl broker answers WriteTxnMarkers v0-1
DONE = frozenset({ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH})


class MarkerBroker(Protocol):
    """What the marker sender uses of its broker."""

    @property
    def broker_id(self) -> int: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def replicas(self) -> ReplicaManager: ...


@dataclass(frozen=True)
class Marker:
    """The end of one producer's transaction: what each partition's marker carries."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool

    @property
    def kind(self) -> str:
        return "COMMIT" if self.commit else "ABORT"


class CoordinatorFencedError(Exception):
    """A partition refused a marker with TRANSACTION_COORDINATOR_FENCED: a newer coordinator exists."""


class MarkerSender:
    """Writes markers for the transaction coordinator of ``broker``; ``channel_to`` opens an inter-broker
    channel to a broker id (None while that broker is not registered)."""

    def __init__(self, broker: MarkerBroker, channel_to: Callable[[int], BrokerChannel | None]) -> None:
        self.broker = broker
        self._channel_to = channel_to
        self._channels: dict[int, BrokerChannel] = {}
        self._failures = RepeatedFailures(log)

    async def write(
        self, marker: Marker, partitions: Iterable[TopicPartition], still_owned: Callable[[], bool]
    ) -> bool:
        """Write ``marker`` to every partition; True once all are written, False if ``still_owned()``
        turned false (or the coordinator was fenced) first."""
        remaining = set(partitions)
        while remaining:
            if not still_owned():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                leader = self._leader(tp)
                if leader is None:  # the topic or partition is gone: nothing to end there
                    log.info(
                        "%s marker of producer %d: %s no longer exists", marker.kind, marker.producer_id, tp
                    )
                    remaining.discard(tp)
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            try:
                written = await asyncio.gather(
                    *(self._write_to(leader, marker, tps) for leader, tps in by_leader.items())
                )
            except CoordinatorFencedError as error:
                log.warning("%s markers of producer %d: %s", marker.kind, marker.producer_id, error)
                return False
            for done in written:
                remaining -= done
            if remaining:
                await asyncio.sleep(RETRY_BACKOFF_S)
        return True

    def _leader(self, tp: TopicPartition) -> int | None:
        """The partition's leader (-1 while it has none), None if the partition does not exist."""
        metadata = self.broker.metadata
        record = metadata.topic(tp.topic)
        if record is None or tp.partition not in record.assignment:
            return None
        state = metadata.partition_state(tp.topic, tp.partition)
        if state is None:  # embedded mode has no states: this broker leads every partition
            return self.broker.broker_id if not self.broker.replicas.replicated else -1
        return state.leader

    async def _write_to(
        self, leader: int, marker: Marker, partitions: list[TopicPartition]
    ) -> set[TopicPartition]:
        if leader == self.broker.broker_id:
            codes = await asyncio.gather(*(self._write_local(marker, tp) for tp in partitions))
            results = dict(zip(partitions, codes, strict=True))
        else:
            results = await self._write_remote(leader, marker, partitions)
        if ErrorCode.TRANSACTION_COORDINATOR_FENCED in results.values():
            raise CoordinatorFencedError(f"a newer coordinator than epoch {marker.coordinator_epoch} wrote")
        for tp, code in results.items():
            if code == ErrorCode.INVALID_PRODUCER_EPOCH:
                log.warning(
                    "%s: a newer epoch of producer %d than %d already wrote; its %s marker is not needed",
                    tp,
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.kind,
                )
            elif code not in DONE:
                log.debug(
                    "%s marker to %s (leader %d): %s, retrying", marker.kind, tp, leader, error_name(code)
                )
        return {tp for tp, code in results.items() if code in DONE}

    async def _write_local(self, marker: Marker, tp: TopicPartition) -> int:
        replicas = self.broker.replicas
        try:
            info = replicas.append_marker(
                tp, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.commit
            )
        except ApiError as error:
            return error.code
        if not replicas.replicated:
            return ErrorCode.NONE
        return await replicas.wait_for_replication(tp, info.last_offset + 1, REPLICATION_TIMEOUT_S)

    async def _write_remote(
        self, leader: int, marker: Marker, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        failed = dict.fromkeys(partitions, int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        channel = self._channels.get(leader)
        if channel is None:
            channel = self._channel_to(leader)
            if channel is None:
                return failed
            self._channels[leader] = channel
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=marker.producer_id,
                    producer_epoch=marker.producer_epoch,
                    transaction_result=marker.commit,
                    topics=[WritableTxnMarkerTopic(name=t, partition_indexes=p) for t, p in topics.items()],
                    coordinator_epoch=marker.coordinator_epoch,
                )
            ]
        )
        key = f"broker {leader}"
        try:
            response = await channel.request(
                ApiKey.WRITE_TXN_MARKERS, MARKERS_VERSION, request, timeout=REPLICATION_TIMEOUT_S + 5
            )
        except ChannelError as error:
            self._failures.failed(key, f"cannot send transaction markers to {key}", error)
            self._channels.pop(leader, None)
            await channel.close()
            return failed
        self._failures.recovered(key, f"transaction markers reach {key}")
        results = dict(failed)
        for result in response.markers:
            for topic in result.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    if tp in results:
                        results[tp] = part.error_code
        return results

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()

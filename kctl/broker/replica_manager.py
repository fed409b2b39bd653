"""The partitions this broker hosts, kept in step with the cluster metadata, and the partition-level
operations the produce, fetch and offset APIs are built on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from kctl.broker.errors import ApiError
from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.partition import Partition
from kctl.log.files import FileRegion, LogStorageError
from kctl.log.log import AppendInfo, OffsetOutOfRangeError, RecordBatchTooLargeError
from kctl.log.manager import LogManager
from kctl.log.naming import TopicPartition
from kctl.log.producer_state import InvalidProducerEpochError, OutOfOrderSequenceError
from kctl.protocol.errors import ErrorCode
from kctl.records.header import InvalidRecordBatch

log = logging.getLogger("kctl.broker.replica_manager")


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, metadata: MetadataCache) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.partitions: dict[TopicPartition, Partition] = {}

    def sync(self) -> None:
        """Create the logs of partitions assigned to this broker; drop those of deleted topics."""
        topics = self.metadata.topics()
        wanted: set[TopicPartition] = set()
        for name, record in topics.items():
            config = self.log_manager.default_config.with_overrides(record.configs)
            self.log_manager.update_topic_config(name, config)
            for partition, replicas in record.assignment.items():
                if self.broker_id not in replicas:
                    continue
                tp = TopicPartition(name, partition)
                wanted.add(tp)
                state = self.metadata.partition_state(name, partition)
                leader = state.leader if state else replicas[0]
                epoch = state.leader_epoch if state else 0
                isr = tuple(state.isr) if state else tuple(replicas)
                existing = self.partitions.get(tp)
                if existing is None:
                    plog = self.log_manager.get_or_create_log(tp, config)
                    self.partitions[tp] = Partition(
                        tp, plog, leader_id=leader, leader_epoch=epoch, replicas=tuple(replicas), isr=isr
                    )
                else:
                    existing.leader_id, existing.leader_epoch = leader, epoch
                    existing.replicas, existing.isr = tuple(replicas), isr
        for tp in [tp for tp in self.partitions if tp not in wanted]:
            removed = self.partitions.pop(tp)
            removed.notify_append()
            if tp.topic not in topics:
                self.log_manager.delete_log(tp)
                log.info("deleted the log of %s", tp)

    def leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            record = self.metadata.topic(tp.topic)
            if record is None or tp.partition not in record.assignment:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist")
            raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{tp} is not hosted by this broker")
        if partition.leader_id != self.broker_id:
            raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {tp}")
        return partition

    def append(self, tp: TopicPartition, records: memoryview | bytes) -> AppendInfo:
        partition = self.leader_partition(tp)
        try:
            info = partition.log.append(records, leader_epoch=partition.leader_epoch)
        except InvalidRecordBatch as error:
            raise ApiError(ErrorCode.CORRUPT_MESSAGE, f"{tp}: {error}") from None
        except OutOfOrderSequenceError as error:
            raise ApiError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, f"{tp}: {error}") from None
        except InvalidProducerEpochError as error:
            raise ApiError(ErrorCode.INVALID_PRODUCER_EPOCH, f"{tp}: {error}") from None
        except RecordBatchTooLargeError as error:
            raise ApiError(ErrorCode.MESSAGE_TOO_LARGE, f"{tp}: {error}") from None
        except LogStorageError as error:
            log.error("storage error appending to %s: %s", tp, error)
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{tp}: {error}") from None
        partition.notify_append()
        return info

    def read(
        self, partition: Partition, offset: int, max_bytes: int, min_one_batch: bool
    ) -> FileRegion | None:
        try:
            return partition.log.read(
                offset, max_bytes, max_offset=partition.high_watermark, min_one_batch=min_one_batch
            )
        except OffsetOutOfRangeError as error:
            raise ApiError(ErrorCode.OFFSET_OUT_OF_RANGE, str(error)) from None
        except LogStorageError as error:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, str(error)) from None

    async def wait_for_append(self, partitions: Iterable[Partition], timeout: float) -> None:
        """Return when any of ``partitions`` gets an append, or after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        parts = list(partitions)
        for partition in parts:
            partition.add_waiter(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            for partition in parts:
                partition.remove_waiter(waiter)

"""The partitions this broker hosts, kept in step with the cluster metadata, and the partition-level
operations the produce, fetch and offset APIs are built on.

``sync()`` brings every hosted partition in line with its state in the metadata cache: a partition
this broker now leads becomes leader (``Partition.make_leader``) and leaves the replica fetcher; one
it follows becomes follower at the state's leader epoch and is fetched from its leader
(``ReplicaFetcherManager``). As leader it changes the ISR itself (``maybe_shrink_isr`` periodically,
expansion on a follower's fetch), writing the partition state with the partition epoch it last saw;
on a conflict it re-reads the metadata and re-decides. While ``fenced`` (the ZooKeeper session was
lost) it leads nothing: produce, consumer fetches and offset lookups answer NOT_LEADER_OR_FOLLOWER
and parked acks=all produces fail so.

A consumer's Fetch v11+ (KIP-392) may read a partition from a follower too, up to the follower's
high watermark (what it learnt from its leader), with the same leader epoch checks; one this broker
leads is answered with a preferred read replica and no records when ``replica.selector.class`` picks
another broker (kctl.broker.replica_selector).

Logs are created by ``sync()`` itself only for a handful of new partitions; when a metadata change
brings more (a follower learning of a wide new topic), a task creates them a slice at a time, letting
the event loop answer requests between slices, and ``sync()`` runs again when they all exist."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from kctl.broker.applied_metadata import AppliedMetadata
from kctl.broker.errors import ApiError
from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.partition import Partition
from kctl.broker.replica_selector import NO_PREFERRED_REPLICA, ReplicaSelector, preferred_read_replica
from kctl.broker.replication.alter_partition import AlterPartitionManager, IsrChange
from kctl.broker.replication.fetcher import ReplicaFetcherManager
from kctl.broker.replication.throttle import ReplicationQuota, leader_throttles, record_leader_bytes
from kctl.common.topic_partition import TopicPartition
from kctl.log.config import LogConfig
from kctl.log.files import FileRegion, LogStorageError
from kctl.log.log import AppendInfo, OffsetOutOfRangeError, RecordBatchTooLargeError
from kctl.log.manager import LogManager
from kctl.log.producer_state import (
    InvalidCoordinatorEpochError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from kctl.log.transactions import AbortedTxn
from kctl.protocol.errors import ErrorCode
from kctl.records.header import InvalidRecordBatch
from kctl.records.validate import InvalidRecordError, RecordError, RecordValidationError
from kctl.zk.model import PartitionState, TopicRecord
from kctl.zk.registry import ClusterMembership, TopicStore


class ReplicaRegistry(TopicStore, ClusterMembership, Protocol):
    """What the replica manager uses of the registry: partition states (ISR changes) and the
    controlled shutdown requests (no ISR expansion to a broker that is leaving)."""


log = logging.getLogger("kctl.broker.replica_manager")

NO_EPOCH = -1
LOG_CREATION_INLINE = 16
"""New logs ``sync()`` creates at once; more are created by a task, a slice at a time."""
LOG_CREATION_SLICE = 16
"""Logs that task creates between two turns of the event loop (about 10 ms of file system calls)."""
LOG_CREATION_RETRY_S = 5.0


def _wake(waiter: asyncio.Future[None]) -> None:
    """A parked fetch's time is up (its waiter may have been woken by an append already)."""
    if not waiter.done():
        waiter.set_result(None)


class PartitionRead:
    """What a Fetch read of one partition (``ReplicaManager.fetch``): an error code, or the offsets
    to answer with, the records (a file region to send and release, None when there are none), the
    aborted transactions for a read_committed consumer, the partition (to park on), and the replica
    the consumer should fetch from instead (KIP-392; -1: none, the records are here)."""

    __slots__ = (
        "aborted",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "partition",
        "preferred_read_replica",
        "records",
    )

    def __init__(
        self,
        error_code: int,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
        records: FileRegion | None = None,
        aborted: list[AbortedTxn] | None = None,
        partition: Partition | None = None,
        preferred_read_replica: int = NO_PREFERRED_REPLICA,
    ) -> None:
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records = records
        self.aborted = aborted
        self.partition = partition
        self.preferred_read_replica = preferred_read_replica

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


class RecordErrorsApiError(ApiError):
    """A produce refused for some of its records: the error code, Kafka's message and the per-record
    errors (Produce v8+ ``record_errors``)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[RecordError]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


class ReplicaManager:
    """The partitions this broker hosts, as leader or follower.

    Concurrency: event loop only. Every method (``sync``, appends, fetch reads, ISR changes,
    fencing) runs on the broker's event loop and none takes a lock: the ``partitions`` table and
    each ``Partition`` are changed only there. Many new logs are created on the loop a slice at a
    time (``after_background_create`` once done); the ISR writes (kctl.broker.replication
    .alter_partition) call the registry in a worker thread and report back on the loop. The
    compaction and dir-move threads reach the logs through the ``LogManager``, never through here."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        metadata: MetadataCache,
        *,
        registry: ReplicaRegistry | None = None,
        fetchers: ReplicaFetcherManager | None = None,
        replicated: bool = False,
        now_ms: Callable[[], int] | None = None,
        on_isr_conflict: Callable[[], None] | None = None,
        on_disk_failure: Callable[[Path, LogStorageError], None] | None = None,
        leader_quota: ReplicationQuota | None = None,
        replica_selector: ReplicaSelector | None = None,
    ) -> None:
        self.broker_id = broker_id
        #: replica.selector.class: picks a consumer's preferred read replica (None: the leader serves)
        self.replica_selector = replica_selector
        #: the bytes this leader sends to throttled followers (leader.replication.throttled.rate)
        self.leader_quota = leader_quota
        self.log_manager = log_manager
        self.metadata = metadata
        self.registry = registry
        self.fetchers = fetchers
        self.replicated = replicated
        self.partitions: dict[TopicPartition, Partition] = {}
        self.offline_partitions: dict[TopicPartition, Partition | None] = {}
        """Replicas lost with a failed log dir (KIP-112): they answer KAFKA_STORAGE_ERROR (None: its
        dir failed before its log was opened)."""
        self.fenced = False
        self.fences = 0  # calls of fence(): a metadata read across one does not unfence (kctl.broker.broker)
        self._now_ms = now_ms or (lambda: int(asyncio.get_running_loop().time() * 1000))
        self._on_isr_conflict = on_isr_conflict
        self._on_disk_failure = on_disk_failure
        self._tasks: set[asyncio.Task[None]] = set()
        self._isr_writes: AlterPartitionManager | None = None  # the ISR changes, batched
        self.isr_shrinks = 0  # ISR changes stored that removed / added replicas (the metrics')
        self.isr_expands = 0
        self._creating: set[TopicPartition] = set()  # logs a task is creating
        self._created: set[TopicPartition] = set()  # logs it created, not yet taken up by sync()
        self._applied = AppliedMetadata()  # what the last sync applied (its unchanged parts are skipped)
        self.after_background_create: Callable[[], None] = self.sync
        """Called once logs created by that task exist (the broker syncs its groups too)."""
        self.on_marker: Callable[[TopicPartition, int, bool, int], None] | None = None
        """Told of every marker appended here as leader: (partition, producer id, commit, marker
        offset); the group coordinator completes the transactional offset commits it ends."""

    # -- roles ---------------------------------------------------------------------------------
    def sync(self) -> None:
        """Create the logs of partitions assigned to this broker, drop those of deleted topics, and
        make each hosted partition leader or follower as its state says. A partition whose record
        and state are the very ones the last sync applied, and which nothing else moved since, is
        skipped (kctl.broker.applied_metadata: at 10,000 partitions a sync held the event loop for
        0.3-0.5 s)."""
        topics = self.metadata.topics()
        applied = self._applied
        applied.retain(topics)
        broker_id, fetchers = self.broker_id, self.fetchers
        deferred = self._defer_log_creation(topics)
        defaults = self.log_manager.default_config
        give = self.log_manager.update_topic_config
        for name, record in topics.items():
            config = applied.topic_config(record, defaults, give)
            for index, replicas in record.assignment.items():
                if broker_id not in replicas:
                    continue
                key = (name, index)
                state = self.metadata.partition_state(name, index)
                partition = self.partitions.get(key)  # type: ignore[call-overload]  # == TopicPartition
                if partition is not None and applied.settled(key, record, state, partition, fetchers):
                    continue
                tp = TopicPartition(name, index)
                if tp in deferred or tp in self.offline_partitions:
                    continue  # its log is being created by a task (sync() runs again then), or is offline
                stored = state
                if state is None:
                    if self.replicated:
                        # no state yet (the controller writes it): host the log, lead nothing
                        state = PartitionState(leader=-1, leader_epoch=NO_EPOCH, isr=(), partition_epoch=-1)
                    else:
                        state = PartitionState(leader=replicas[0], leader_epoch=0, isr=tuple(replicas))
                if partition is None:
                    plog = self.log_manager.get_or_create_log(tp, config)
                    partition = self.partitions[tp] = Partition(
                        tp,
                        plog,
                        leader_id=-1,
                        leader_epoch=NO_EPOCH,
                        replicas=tuple(replicas),
                        isr=(),
                        broker_id=broker_id,
                        partition_epoch=-1,
                        replicated=self.replicated,
                    )
                partition.removing = record.removing_replicas.get(index, ())
                self._apply_state(partition, state, tuple(replicas))
                applied.applied(key, record, stored)
        gone = [tp for tp in self._created if not self._assigned(topics, tp)]
        for tp in [tp for tp in gone if tp not in self.partitions]:
            self.log_manager.delete_log(tp)  # its topic went while the task created it
        self._created.clear()
        for tp in [tp for tp in self.offline_partitions if not self._assigned(topics, tp)]:
            del self.offline_partitions[tp]  # its log stays in the failed dir, as Kafka leaves it
        for tp in [tp for tp in self.partitions if not self._assigned(topics, tp)]:
            removed = self.partitions.pop(tp)
            applied.drop(tp)
            if fetchers is not None:
                fetchers.remove_partition(tp)
            removed.make_follower(
                -1, removed.leader_epoch, removed.isr, removed.replicas, removed.partition_epoch, 0
            )
            # The topic was deleted, or a reassignment moved this replica away: Kafka's StopReplica
            # with deletePartition, the replica's log goes.
            self.log_manager.delete_log(tp)
            why = "its topic was deleted" if tp.topic not in topics else "it is no longer a replica"
            log.info("deleted the log of %s (%s)", tp, why)
        if fetchers is not None and any(not f.partitions for f in fetchers.fetchers.values()):
            task = asyncio.get_running_loop().create_task(fetchers.shutdown_idle())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _assigned(self, topics: dict[str, TopicRecord], tp: TopicPartition) -> bool:
        """Whether ``tp`` is assigned to this broker in ``topics``."""
        record = topics.get(tp.topic)
        return record is not None and self.broker_id in record.assignment.get(tp.partition, ())

    def _defer_log_creation(self, topics: dict[str, TopicRecord]) -> set[TopicPartition]:
        """The hosted partitions whose logs are (now) being created by a task: those already
        under way, plus all the missing ones when more than LOG_CREATION_INLINE are missing and an
        event loop runs (without one, e.g. in unit tests, sync() creates them itself)."""
        missing: list[tuple[TopicPartition, LogConfig]] = []
        for name, record in topics.items():
            config: LogConfig | None = None
            for index, replicas in record.assignment.items():
                if self.broker_id not in replicas:
                    continue
                if (name, index) in self.partitions:  # a TopicPartition is a tuple: no object made
                    continue
                tp = TopicPartition(name, index)
                if tp in self._creating or self.log_manager.get_log(tp) is not None:
                    continue
                if tp in self.offline_partitions:
                    continue
                if config is None:
                    config = self.log_manager.default_config.with_overrides(record.configs)
                missing.append((tp, config))
        if len(missing) <= LOG_CREATION_INLINE:
            return self._creating
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._creating
        tps = [tp for tp, _ in missing]
        self._creating.update(tps)
        log.info("creating %d new partition logs, %d at a time", len(tps), LOG_CREATION_SLICE)
        task = loop.create_task(self._create_logs(missing))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return self._creating

    async def _create_logs(self, missing: list[tuple[TopicPartition, LogConfig]]) -> None:
        """Create ``missing`` logs a slice at a time on the event loop, yielding between slices (a
        worker thread would do no better: each of its file system calls waits for the GIL behind a
        busy event loop), then sync again."""
        logs = self.log_manager
        failed: Exception | None = None
        try:
            for start in range(0, len(missing), LOG_CREATION_SLICE):
                for tp, config in missing[start : start + LOG_CREATION_SLICE]:
                    if logs.get_log(tp) is None:
                        logs.get_or_create_log(tp, config)
                await asyncio.sleep(0)  # requests waiting are answered between slices
        except (LogStorageError, OSError, ValueError) as error:
            failed = error
        finally:
            tps = [tp for tp, _ in missing]
            self._creating.difference_update(tps)
            self._created.update(tp for tp in tps if logs.get_log(tp) is not None)
        if failed is None:
            self.after_background_create()
            return
        # tried again after a pause: a full disk does not turn into a loop of failing attempts
        log.error("creating partition logs failed (retrying in %.0f s): %s", LOG_CREATION_RETRY_S, failed)
        await asyncio.sleep(LOG_CREATION_RETRY_S)
        self.after_background_create()

    def _apply_state(self, partition: Partition, state: PartitionState, replicas: tuple[int, ...]) -> None:
        same_epoch = partition.leader_id == state.leader and partition.leader_epoch == state.leader_epoch
        if same_epoch:
            if state.partition_epoch >= partition.partition_epoch:  # never a stale snapshot's ISR
                partition.update_state(state.isr, replicas, state.partition_epoch, state.controller_epoch)
                partition.elr = state.elr
                if partition.is_leader:
                    partition.maybe_advance_high_watermark()
                    partition.complete_acks()
            elif partition.replicas != replicas:
                partition.replicas = replicas
                partition.state_changed()
            fetchers = self.fetchers
            if (
                not partition.is_leader
                and fetchers is not None
                and state.leader >= 0
                and fetchers.fetching(partition.topic_partition) is None
            ):
                fetchers.add_partition(partition, state.leader, state.leader_epoch)
            return
        if state.partition_epoch < partition.partition_epoch:
            return  # an older snapshot than what this partition already acted on
        tp = partition.topic_partition
        partition.elr = state.elr
        if state.leader == self.broker_id:
            if self.fetchers is not None:
                self.fetchers.remove_partition(tp)
            if self.replicated and len(replicas) > 1 and state.isr == (self.broker_id,):
                # perhaps an unclean election: producers whose acknowledged batches only the other
                # replicas held are unknown here, and may go on at any sequence (as in Kafka)
                partition.log.producer_state.mark_incomplete(
                    f"took the lead at epoch {state.leader_epoch} with an ISR of itself alone"
                )
            partition.make_leader(
                state.leader_epoch,
                state.isr,
                replicas,
                state.partition_epoch,
                state.controller_epoch,
                self._now_ms(),
            )
            if self.replicated:
                log.info("%s: leader at epoch %d, ISR %s", tp, state.leader_epoch, list(state.isr))
        else:
            partition.make_follower(
                state.leader,
                state.leader_epoch,
                state.isr,
                replicas,
                state.partition_epoch,
                state.controller_epoch,
            )
            if self.fetchers is not None:
                if state.leader >= 0:
                    self.fetchers.add_partition(partition, state.leader, state.leader_epoch)
                else:
                    self.fetchers.remove_partition(tp)
            if self.replicated:
                log.info("%s: follower of %d at epoch %d", tp, state.leader, state.leader_epoch)

    def fence(self) -> None:
        """The registry session is gone: lead nothing until ``unfence`` (zombie fencing)."""
        self.fences += 1  # a metadata read under way when this came may predate the loss
        if self.fenced:
            return
        self.fenced = True
        log.warning("ZooKeeper session lost: broker %d stops leading until it is back", self.broker_id)
        for partition in self.partitions.values():
            partition.fail_acks(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            partition.notify_append()

    def unfence(self) -> None:
        self._applied.forget()  # the next sync looks at every partition again
        if self.fenced:
            self.fenced = False
            log.info(
                "ZooKeeper session re-established and states re-read: broker %d leads again", self.broker_id
            )

    # -- lookups -------------------------------------------------------------------------------
    def now_ms(self) -> int:
        """The clock the followers' fetch times are stamped with (milliseconds)."""
        return self._now_ms()

    def hosted_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            if tp in self.offline_partitions:
                raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{tp} is in an offline log directory")
            record = self.metadata.topic(tp.topic)
            if record is None or tp.partition not in record.assignment:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist")
            raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{tp} is not hosted by this broker")
        return partition

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = NO_EPOCH) -> Partition:
        """The partition if this broker leads it (checking the request's ``current_leader_epoch``
        when given: older -> FENCED_LEADER_EPOCH, newer -> UNKNOWN_LEADER_EPOCH)."""
        partition = self.readable_partition(tp, current_leader_epoch)
        if not partition.is_leader:
            raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {tp}")
        return partition

    def readable_partition(self, tp: TopicPartition, current_leader_epoch: int = NO_EPOCH) -> Partition:
        """The partition if this broker hosts it, as leader or follower, with the epoch checks of
        ``leader_partition`` (a consumer's Fetch v11+ may read from a follower, KIP-392)."""
        partition = self.hosted_partition(tp)
        if current_leader_epoch >= 0:
            if current_leader_epoch < partition.leader_epoch:
                raise ApiError(ErrorCode.FENCED_LEADER_EPOCH, f"{tp}: epoch {current_leader_epoch} is fenced")
            if current_leader_epoch > partition.leader_epoch:
                raise ApiError(
                    ErrorCode.UNKNOWN_LEADER_EPOCH, f"{tp}: epoch {current_leader_epoch} is unknown"
                )
        if self.fenced:
            raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} is fenced")
        return partition

    # -- produce -------------------------------------------------------------------------------
    def append(
        self,
        tp: TopicPartition,
        records: memoryview | bytes,
        *,
        acks: int = 1,
        from_coordinator: bool = False,
    ) -> AppendInfo:
        """Append batches as the leader (``from_coordinator``: the group coordinator's write for a
        transactional producer, see :meth:`kctl.log.log.Log.append`)."""
        partition = self.leader_partition(tp)
        if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
            raise ApiError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{tp}: ISR {list(partition.isr)} is smaller than min.insync.replicas "
                f"{partition.min_insync_replicas}",
            )
        try:
            info = partition.log.append(
                records, leader_epoch=partition.leader_epoch, from_coordinator=from_coordinator
            )
        except RecordValidationError as error:
            code = ErrorCode.INVALID_TIMESTAMP if error.invalid_timestamp else ErrorCode.INVALID_RECORD
            raise RecordErrorsApiError(code, str(error), error.record_errors) from None
        except InvalidRecordError as error:
            raise ApiError(ErrorCode.INVALID_RECORD, f"{tp}: {error}") from None
        except InvalidRecordBatch as error:
            raise ApiError(ErrorCode.CORRUPT_MESSAGE, f"{tp}: {error}") from None
        except OutOfOrderSequenceError as error:
            raise ApiError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, f"{tp}: {error}") from None
        except InvalidProducerEpochError as error:
            raise ApiError(ErrorCode.INVALID_PRODUCER_EPOCH, f"{tp}: {error}") from None
        except InvalidTxnStateError as error:
            raise ApiError(ErrorCode.INVALID_TXN_STATE, f"{tp}: {error}") from None
        except RecordBatchTooLargeError as error:
            raise ApiError(ErrorCode.MESSAGE_TOO_LARGE, f"{tp}: {error}") from None
        except LogStorageError as error:
            log.error("storage error appending to %s: %s", tp, error)
            self._storage_failed(partition, error)
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{tp}: {error}") from None
        if self.replicated:
            partition.maybe_advance_high_watermark()  # wakes the consumers' fetches if it moved
        partition.notify_append(consumers=not self.replicated)
        return info

    def append_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> AppendInfo:
        """Append a COMMIT or ABORT marker ending ``producer_id``'s transaction on a partition this
        broker leads (WriteTxnMarkers). ApiError: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR."""
        partition = self.leader_partition(tp)
        try:
            info = partition.log.append_control_marker(
                producer_id, producer_epoch, coordinator_epoch, commit, leader_epoch=partition.leader_epoch
            )
        except InvalidProducerEpochError as error:
            raise ApiError(ErrorCode.INVALID_PRODUCER_EPOCH, f"{tp}: {error}") from None
        except InvalidCoordinatorEpochError as error:
            raise ApiError(ErrorCode.TRANSACTION_COORDINATOR_FENCED, f"{tp}: {error}") from None
        except LogStorageError as error:
            log.error("storage error appending a marker to %s: %s", tp, error)
            self._storage_failed(partition, error)
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{tp}: {error}") from None
        if self.replicated:
            partition.maybe_advance_high_watermark()
        partition.notify_append(consumers=not self.replicated)
        if self.on_marker is not None:
            self.on_marker(tp, producer_id, commit, info.first_offset)
        return info

    async def wait_for_replication(self, tp: TopicPartition, required_offset: int, timeout: float) -> int:
        """Wait until ``tp``'s high watermark reaches ``required_offset`` (acks=all): the error code
        to answer — NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below min.insync.replicas
        meanwhile), NOT_LEADER_OR_FOLLOWER (leadership lost), or REQUEST_TIMED_OUT."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader or self.fenced:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        future = partition.add_ack_waiter(required_offset)
        try:
            async with asyncio.timeout(timeout):  # not wait_for: 3.11's can swallow a cancellation
                return await asyncio.shield(future)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        finally:
            partition.remove_ack_waiter(future)

    # -- fetch ---------------------------------------------------------------------------------
    def fetch(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        max_bytes: int,
        *,
        current_leader_epoch: int = NO_EPOCH,
        replica_id: int = -1,
        read_committed: bool = False,
        min_one_batch: bool = True,
        client_rack: str | None = None,
        log_start_offset: int = -1,
    ) -> PartitionRead:
        """One partition of a Fetch, as this broker leads it. A follower (``replica_id`` >= 0) is
        recorded as fetching at ``fetch_offset`` (and with its ``log_start_offset``; which may
        advance the high watermark, complete acks=all produces and add it to the ISR) and reads up to
        the log end, unless leader.replication.throttled.rate holds it back; a consumer reads up to
        the high watermark, read_committed up to the last stable offset, with the aborted
        transactions overlapping what it reads. A consumer's Fetch v11+ (``client_rack`` not None,
        maybe empty) reads a follower's replica as well; as leader, this broker may answer it with
        the preferred read replica of its rack instead (KIP-392). Errors come back as the read's
        error code."""
        follower = replica_id >= 0
        try:
            if client_rack is None or follower:
                partition = self.leader_partition(tp, current_leader_epoch)
            else:
                partition = self.readable_partition(tp, current_leader_epoch)
                redirect = self._redirect(partition, client_rack, fetch_offset)
                if redirect is not None:
                    return redirect
            if follower:
                self.record_follower_fetch(partition, replica_id, fetch_offset, log_start_offset)
            high_watermark = partition.log.high_watermark
            last_stable_offset = partition.log.last_stable_offset
            region = None
            quota = self.leader_quota
            if follower and quota is not None and leader_throttles(quota, partition, replica_id):
                pass  # leader.replication.throttled.rate exceeded: no records this time
            elif max_bytes > 0 or min_one_batch:
                if read_committed:
                    max_offset: int | None = last_stable_offset
                else:
                    max_offset = None if follower else high_watermark
                region = self.read(
                    partition,
                    fetch_offset,
                    max(max_bytes, 0),
                    min_one_batch,
                    follower=follower,
                    max_offset=max_offset,
                )
                if follower and region is not None and quota is not None:
                    record_leader_bytes(quota, partition, replica_id, region.size)
        except ApiError as error:
            return PartitionRead(error.code)
        aborted = None
        if read_committed:
            aborted = (
                partition.log.aborted_transactions(fetch_offset, last_stable_offset)
                if region is not None
                else []
            )
        return PartitionRead(
            ErrorCode.NONE,
            high_watermark,
            last_stable_offset,
            partition.log.log_start_offset,
            region,
            aborted,
            partition,
        )

    def _redirect(self, partition: Partition, client_rack: str, fetch_offset: int) -> PartitionRead | None:
        """As leader with a replica selector: the answer naming another broker as the consumer's
        preferred read replica (the offsets, no records), or None when this leader serves it."""
        selector = self.replica_selector
        if selector is None or not partition.is_leader:
            return None
        racks, now = self.metadata.broker_racks(), self._now_ms()
        preferred = preferred_read_replica(selector, partition, client_rack, fetch_offset, racks, now)
        if preferred == NO_PREFERRED_REPLICA:
            return None
        plog = partition.log
        offsets = (plog.high_watermark, plog.last_stable_offset, plog.log_start_offset)
        return PartitionRead(ErrorCode.NONE, *offsets, partition=partition, preferred_read_replica=preferred)

    def read(
        self,
        partition: Partition,
        offset: int,
        max_bytes: int,
        min_one_batch: bool,
        *,
        follower: bool = False,
        max_offset: int | None = None,
    ) -> FileRegion | None:
        """Read for a consumer (up to ``max_offset``, default the high watermark; a read_committed one
        passes the last stable offset) or a follower (up to the log end)."""
        if max_offset is None and not follower:
            max_offset = partition.high_watermark
        try:
            return partition.log.read(
                offset,
                max_bytes,
                max_offset=max_offset,
                min_one_batch=min_one_batch,
            )
        except OffsetOutOfRangeError as error:
            raise ApiError(ErrorCode.OFFSET_OUT_OF_RANGE, str(error)) from None
        except LogStorageError as error:
            self._storage_failed(partition, error)
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, str(error)) from None

    def _storage_failed(self, partition: Partition, error: LogStorageError) -> None:
        if error.disk_failed and self._on_disk_failure is not None:
            self._on_disk_failure(partition.log.directory.parent, error)

    def take_offline_unloaded(self) -> list[TopicPartition]:
        """At start, with log dirs that failed while loading: the partitions assigned here whose log
        is in no online dir may have theirs in a failed one, so they are offline replicas (answer
        KAFKA_STORAGE_ERROR, lead and follow nothing) rather than empty logs that could be elected
        leader, as Kafka refuses to create the log of a partition that is not new while a log dir
        is offline. Partitions assigned here later (a new topic, a reassignment) get new logs."""
        if not self.log_manager.offline_dirs:
            return []
        unloaded = []
        for name, record in self.metadata.topics().items():
            for index, replicas in record.assignment.items():
                tp = TopicPartition(name, index)
                if self.broker_id in replicas and self.log_manager.get_log(tp) is None:
                    self.offline_partitions[tp] = None
                    unloaded.append(tp)
        return unloaded

    def take_offline(self, tps: Iterable[TopicPartition]) -> None:
        """These replicas' log dir failed: they lead and follow nothing any more and answer
        KAFKA_STORAGE_ERROR (parked acks=all produces too) until the broker restarts."""
        for tp in tps:
            partition = self.partitions.pop(tp, None)
            if partition is None:
                continue
            self.offline_partitions[tp] = partition
            if self.fetchers is not None:
                self.fetchers.remove_partition(tp)
            partition.fail_acks(ErrorCode.KAFKA_STORAGE_ERROR)
            partition.notify_append()

    def record_follower_fetch(
        self, partition: Partition, replica_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> None:
        """A follower fetch at ``fetch_offset``: update what the leader knows of it, advance the high
        watermark, and add it to the ISR once it has caught up."""
        if replica_id not in partition.replicas:
            raise ApiError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a replica of {partition.topic_partition}",
            )
        if fetch_offset > partition.log_end_offset or fetch_offset < 0:
            return  # the read answers OFFSET_OUT_OF_RANGE; the follower truncates
        partition.record_follower_fetch(replica_id, fetch_offset, self._now_ms(), log_start_offset)
        partition.maybe_advance_high_watermark()
        if (
            partition.replica_to_add(replica_id)
            and not partition.isr_update_pending
            and not self.metadata.shutting_down(replica_id)  # leaving: never back into an ISR
        ):
            new_isr = tuple(sorted({*partition.isr, replica_id}))
            self._start_isr_update(partition, new_isr, f"broker {replica_id} caught up")

    async def wait_for_append(
        self, partitions: Iterable[Partition], timeout: float, *, follower: bool = False
    ) -> None:
        """Return when any of ``partitions`` gets an append (a follower's fetch) or a high watermark
        move (a consumer's), or after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        parts = list(partitions)
        for partition in parts:
            partition.add_waiter(waiter, follower=follower)
        # a timer handle rather than asyncio.wait_for (no second future, no done-callback chain): a
        # long poll at a low rate parks and wakes once per record
        timer = loop.call_later(timeout, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            for partition in parts:
                partition.remove_waiter(waiter)

    # -- ISR changes (the leader makes them, decision 4) ---------------------------------------
    def maybe_shrink_isr(self, lag_max_ms: int) -> None:
        """Drop from each led partition's ISR the followers not caught up for ``lag_max_ms``."""
        if self.fenced or self.registry is None:
            return
        now = self._now_ms()
        for partition in self.partitions.values():
            if not partition.is_leader or partition.isr_update_pending:
                continue
            lagging = partition.out_of_sync_replicas(now, lag_max_ms)
            if lagging:
                new_isr = tuple(r for r in partition.isr if r not in lagging)
                self._start_isr_update(partition, new_isr, f"{sorted(lagging)} fell behind")

    def _start_isr_update(self, partition: Partition, new_isr: tuple[int, ...], why: str) -> None:
        if self.registry is None or self.fenced:
            return
        partition.isr_update_pending = True
        # the high watermark counts joining replicas until the write is done (maximal ISR)
        partition.isr_pending_additions = tuple(r for r in new_isr if r not in partition.isr)
        partition.state_changed()
        if self._isr_writes is None:
            self._isr_writes = AlterPartitionManager(
                self.registry, on_stored=self._isr_stored, on_conflict=self._on_isr_conflict
            )
        state = PartitionState(
            leader=self.broker_id,
            leader_epoch=partition.leader_epoch,
            isr=new_isr,
            controller_epoch=partition.controller_epoch,
            elr=partition.elr_after(new_isr),
        )
        self._isr_writes.submit(IsrChange(partition, state, partition.partition_epoch, partition.isr, why))

    def _isr_stored(self, change: IsrChange, stored: PartitionState) -> None:
        """The registry has ``change``: take it up, unless the partition moved on meanwhile."""
        partition = change.partition
        tp = partition.topic_partition
        if (
            self.partitions.get(tp) is not partition
            or not partition.is_leader
            or partition.leader_epoch != change.state.leader_epoch
        ):
            return
        eligible = f"; eligible leader replicas {list(stored.elr)}" if stored.elr else ""
        log.info(
            "%s: ISR %s -> %s (%s)%s", tp, list(change.previous_isr), list(stored.isr), change.why, eligible
        )
        if set(change.previous_isr) - set(stored.isr):
            self.isr_shrinks += 1
        if set(stored.isr) - set(change.previous_isr):
            self.isr_expands += 1
        partition.update_state(
            stored.isr, partition.replicas, stored.partition_epoch, stored.controller_epoch
        )
        partition.elr = stored.elr
        partition.maybe_advance_high_watermark()
        partition.complete_acks()

    async def stop_fetching(self) -> None:
        """Stop every replica fetcher for good (a broker whose controlled shutdown is done: Kafka
        stops its fetchers then, so that no leader takes it back into an ISR)."""
        if self.fetchers is not None:
            await self.fetchers.close()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._isr_writes is not None:
            await self._isr_writes.close()
        await self.stop_fetching()

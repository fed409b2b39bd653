"""The TransactionCoordinator: the transactions of the transactional ids whose ``__transaction_state``
partition this broker leads (KIP-98; Kafka 3.9's semantics, transaction version 1).

Ownership follows leadership, as for the group coordinator: a broker that becomes leader of a
partition of ``__transaction_state`` reads it to rebuild the metadata of its transactional ids
(answering COORDINATOR_LOAD_IN_PROGRESS meanwhile), with the partition's leader epoch as its
*coordinator epoch* (stamped on every marker it writes); then it finishes the transactions it found
in PrepareCommit or PrepareAbort (a coordinator that died after writing one). A broker that loses the
partition drops them (NOT_COORDINATOR).

Every state change is written first: the next metadata is built, the current one marked pending
(concurrent requests for the id answer CONCURRENT_TRANSACTIONS), the record appended with acks=all
and waited for until replicated; only then is it the state. The request operations (InitProducerId,
AddPartitionsToTxn, EndTxn) are in ``kctl.broker.transaction.operations``; ending a transaction
(markers, then CompleteCommit/CompleteAbort) and the periodic work (aborting timed-out transactions,
removing expired transactional ids) are here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from kctl.broker.errors import ApiError
from kctl.broker.transaction.markers import Marker, MarkerSender
from kctl.broker.transaction.records import (
    TRANSACTION_STATE_TOPIC,
    CorruptTransactionRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for_transactional_id,
)
from kctl.broker.transaction.state import (
    COMPLETED,
    MAX_PRODUCER_EPOCH,
    PREPARING,
    TransactionMetadata,
    TransactionState,
)
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import ErrorCode, error_name
from kctl.records.builder import RecordBatchBuilder
from kctl.records.reader import iter_batches

if TYPE_CHECKING:
    from kctl.broker.config import BrokerConfig
    from kctl.broker.metadata_cache import MetadataCache
    from kctl.broker.producer_ids import ProducerIdManager
    from kctl.broker.replica_manager import ReplicaManager
    from kctl.broker.replication.channel import BrokerChannel
    from kctl.broker.topics import TopicAdmin
    from kctl.log.clock import Clock

log = logging.getLogger("kctl.broker.transaction")

READ_CHUNK = 4 * 1024 * 1024
WRITE_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms for the coordinator's appends
RETRY_BACKOFF_S = 0.1
#: what an append to __transaction_state answers the client (Kafka's mapping)
APPEND_ERRORS: dict[int, ErrorCode] = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


class TransactionBroker(Protocol):
    """What the transaction coordinator uses of its broker (``kctl.broker.broker.Broker`` is one)."""

    @property
    def broker_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def metadata(self) -> MetadataCache: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def topics(self) -> TopicAdmin: ...
    @property
    def producer_ids(self) -> ProducerIdManager: ...
    def on_metadata_changed(self) -> None: ...


class TransactionCoordinator:
    def __init__(self, broker: TransactionBroker, channel_to: Callable[[int], BrokerChannel | None]) -> None:
        self.broker = broker
        config = broker.config
        self.partitions: int = config["transaction.state.log.num.partitions"]
        self.max_timeout_ms: int = config["transaction.max.timeout.ms"]
        self.id_expiration_ms: int = config["transactional.id.expiration.ms"]
        self.transactions: dict[str, TransactionMetadata] = {}
        self.loaded: dict[int, int] = {}  # __transaction_state partition -> coordinator epoch
        self.loading: dict[int, int] = {}
        self.markers = MarkerSender(broker, channel_to)
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- placement and ownership ---------------------------------------------------------------
    def partition_of(self, transactional_id: str) -> int:
        return partition_for_transactional_id(transactional_id, self.partitions)

    def coordinator_for(self, transactional_id: str) -> int:
        """The broker id leading ``transactional_id``'s __transaction_state partition, creating the
        topic on first use (from whichever broker is asked, as for __consumer_offsets); raises
        ApiError(COORDINATOR_NOT_AVAILABLE) while it cannot be known."""
        broker = self.broker
        if broker.metadata.topic(TRANSACTION_STATE_TOPIC) is None:
            self._create_topic()
        state = broker.metadata.partition_state(TRANSACTION_STATE_TOPIC, self.partition_of(transactional_id))
        if state is None:
            if broker.replicas.replicated:
                raise ApiError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction's partition has no leader"
                )
            return broker.broker_id
        if state.leader < 0:
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction's partition has no leader")
        return state.leader

    def _create_topic(self) -> None:
        config = self.broker.config
        replicated = self.broker.replicas.replicated
        # as for __consumer_offsets (KIP-115): a cluster waits until the replication factor's brokers are up
        factor = max(config["transaction.state.log.replication.factor"], 1) if replicated else 1
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
            "unclean.leader.election.enable": "false",
        }
        if replicated:
            configs["min.insync.replicas"] = str(min(config["transaction.state.log.min.isr"], factor))
        try:
            self.broker.topics.create_topic(
                TRANSACTION_STATE_TOPIC, self.partitions, factor, configs=configs, internal=True
            )
        except ApiError as error:
            if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, error.message) from None
        except OSError as error:  # the logs could not be created (a full disk)
            raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create the logs: {error}") from None
        self.broker.on_metadata_changed()

    def check_owner(self, transactional_id: str) -> tuple[int, int]:
        """``(partition, coordinator epoch)`` of ``transactional_id``; raises ApiError
        (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) unless this broker coordinates it."""
        partition = self.partition_of(transactional_id)
        if self.broker.replicas.fenced:  # a zombie (session lost, or it stood still): not any more
            raise ApiError(ErrorCode.NOT_COORDINATOR, f"broker {self.broker.broker_id} is fenced")
        if partition in self.loading:
            raise ApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        epoch = self.loaded.get(partition)
        if epoch is None and self._should_lead(partition):  # its log is still being created
            raise ApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if epoch is None:
            raise ApiError(
                ErrorCode.NOT_COORDINATOR,
                f"broker {self.broker.broker_id} does not coordinate transactional id {transactional_id!r}",
            )
        return partition, epoch

    def _should_lead(self, partition: int) -> bool:
        """Whether the metadata names this broker leader of the __transaction_state partition."""
        metadata = self.broker.metadata
        if metadata.topic(TRANSACTION_STATE_TOPIC) is None:
            return False
        state = metadata.partition_state(TRANSACTION_STATE_TOPIC, partition)
        if state is None:
            return not self.broker.replicas.replicated
        return state.leader == self.broker.broker_id

    def owns(self, partition: int, epoch: int) -> bool:
        return self.loaded.get(partition) == epoch

    # -- loading -------------------------------------------------------------------------------
    def on_partitions_changed(self) -> None:
        """Load the __transaction_state partitions this broker now leads (again when led in a new
        epoch); drop the others."""
        led = {
            tp.partition: partition.leader_epoch
            for tp, partition in self.broker.replicas.partitions.items()
            if tp.topic == TRANSACTION_STATE_TOPIC and partition.is_leader
        }
        for partition in (set(self.loaded) | set(self.loading)) - set(led):
            self._unload(partition)
        for partition, epoch in sorted(led.items()):
            if epoch in (self.loaded.get(partition), self.loading.get(partition)):
                continue
            self._unload(partition)
            self.loading[partition] = epoch
            self.spawn(self._load(partition, epoch), f"load {TRANSACTION_STATE_TOPIC}-{partition}")

    def _unload(self, partition: int) -> None:
        was = self.loaded.pop(partition, None)
        self.loading.pop(partition, None)
        dropped = [tid for tid in self.transactions if self.partition_of(tid) == partition]
        for tid in dropped:
            del self.transactions[tid]
        if was is not None:
            log.info(
                "no longer coordinator of %s-%d (%d transactional ids)",
                TRANSACTION_STATE_TOPIC,
                partition,
                len(dropped),
            )

    async def _load(self, partition: int, epoch: int) -> None:
        await asyncio.sleep(0)  # let the caller finish first
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        found: dict[str, TransactionMetadata | None] = {}
        try:
            hosted = self.broker.replicas.partitions.get(tp)
            if hosted is None or self.loading.get(partition) != epoch:
                return
            plog = hosted.log
            offset = plog.log_start_offset
            while offset < plog.log_end_offset:
                data = plog.read_bytes(offset, READ_CHUNK)
                last = offset
                for batch in iter_batches(data, verify_crc=False):
                    for record in batch.records:
                        self._apply(found, record.key, record.value)
                    last = batch.header.next_offset
                if last == offset:
                    break
                offset = last
                await asyncio.sleep(0)
                if self.loading.get(partition) != epoch:
                    return
        except Exception:
            log.exception("loading %s failed", tp)
            if self.loading.get(partition) == epoch:
                del self.loading[partition]
            return
        if self.loading.get(partition) != epoch:
            return
        del self.loading[partition]
        for tid, metadata in found.items():
            if metadata is not None:
                self.transactions[tid] = metadata
        self.loaded[partition] = epoch
        unfinished = [m for m in found.values() if m is not None and m.state in PREPARING]
        log.log(
            logging.INFO if found else logging.DEBUG,
            "coordinator of %s (epoch %d): %d transactional ids, %d transactions to complete",
            tp,
            epoch,
            sum(m is not None for m in found.values()),
            len(unfinished),
        )
        for metadata in unfinished:
            self.spawn(self.complete(metadata, partition, epoch), f"complete {metadata.transactional_id}")

    @staticmethod
    def _apply(found: dict[str, TransactionMetadata | None], key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            tid = decode_key(key)
            found[tid] = None if value is None else decode_value(tid, value)
        except CorruptTransactionRecordError as error:
            log.warning("skipping a malformed %s record: %s", TRANSACTION_STATE_TOPIC, error)

    # -- persistence ---------------------------------------------------------------------------
    async def transition(
        self,
        current: TransactionMetadata,
        new: TransactionMetadata | None,
        partition: int,
        epoch: int,
        *,
        pending: TransactionState | None = None,
    ) -> None:
        """Write ``new`` (None: a tombstone) for ``current``'s transactional id, then make it the
        state; raises ApiError (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) and leaves the state as it
        was when the write fails."""
        tid = current.transactional_id
        current.pending = pending or (new.state if new is not None else TransactionState.DEAD)
        try:
            await self._append(partition, encode_key(tid), None if new is None else encode_value(new))
        finally:
            current.pending = None
        if not self.owns(partition, epoch) or self.transactions.get(tid) is not current:
            raise ApiError(ErrorCode.NOT_COORDINATOR, f"coordinator of {tid!r} moved during the write")
        if new is None:
            del self.transactions[tid]
        else:
            self.transactions[tid] = new

    async def _append(self, partition: int, key: bytes, value: bytes | None) -> None:
        replicas = self.broker.replicas
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        builder = RecordBatchBuilder()
        builder.append(self.broker.clock.time_ms(), key, value)
        try:
            info = replicas.append(tp, builder.build(), acks=-1)
        except ApiError as error:
            log.warning("cannot write to %s: %s", tp, error.message)
            raise ApiError(
                APPEND_ERRORS.get(error.code, ErrorCode.UNKNOWN_SERVER_ERROR), error.message
            ) from None
        if replicas.replicated:
            code = await replicas.wait_for_replication(tp, info.last_offset + 1, WRITE_TIMEOUT_S)
            if code != ErrorCode.NONE:
                mapped = APPEND_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)
                raise ApiError(mapped, f"{tp}: {error_name(code)}")

    # -- ending transactions -------------------------------------------------------------------
    async def complete(self, prepared: TransactionMetadata, partition: int, epoch: int) -> None:
        """Write the markers of a transaction in PrepareCommit/PrepareAbort, then CompleteCommit /
        CompleteAbort; retried until done or no longer this coordinator's."""
        tid = prepared.transactional_id
        commit = prepared.state == TransactionState.PREPARE_COMMIT

        def still_owned() -> bool:
            return self.owns(partition, epoch) and self.transactions.get(tid) is prepared

        marker = Marker(prepared.producer_id, prepared.producer_epoch, epoch, commit)
        if not await self.markers.write(marker, prepared.partitions, still_owned):
            log.info("transactional id %r: no longer this coordinator's, markers left to the next", tid)
            return
        final = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        while still_owned():
            done = prepared.next(final, self.broker.clock.time_ms(), partitions=frozenset())
            try:
                await self.transition(prepared, done, partition, epoch)
                log.debug("transactional id %r: %s", tid, final.kafka_name)
                return
            except ApiError as error:
                if error.code == ErrorCode.NOT_COORDINATOR:
                    return
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def fence_and_abort(self, ongoing: TransactionMetadata, partition: int, epoch: int) -> None:
        """Abort ``ongoing``'s transaction with the producer epoch bumped (PrepareEpochFence, then
        PrepareAbort), so its producer is fenced on the coordinator and on the partitions; the markers
        follow in the background. Raises ApiError when the PrepareAbort cannot be written."""
        now = self.broker.clock.time_ms()
        bumped = (
            ongoing.producer_epoch + 1
            if ongoing.producer_epoch < MAX_PRODUCER_EPOCH - 1
            else ongoing.producer_epoch
        )
        aborting = ongoing.next(
            TransactionState.PREPARE_ABORT, now, producer_epoch=bumped, last_producer_epoch=-1
        )
        await self.transition(
            ongoing, aborting, partition, epoch, pending=TransactionState.PREPARE_EPOCH_FENCE
        )
        self.spawn(self.complete(aborting, partition, epoch), f"abort {ongoing.transactional_id}")

    # -- periodic work -------------------------------------------------------------------------
    def abort_timed_out(self) -> None:
        """Abort (fencing their producers) the transactions open for longer than their timeout."""
        now = self.broker.clock.time_ms()
        for metadata in list(self.transactions.values()):
            if (
                metadata.state == TransactionState.ONGOING
                and metadata.pending is None
                and metadata.start_ms + metadata.timeout_ms < now
            ):
                tid = metadata.transactional_id
                log.info(
                    "transactional id %r: aborting the transaction of producer %d epoch %d, open longer "
                    "than its timeout of %d ms",
                    tid,
                    metadata.producer_id,
                    metadata.producer_epoch,
                    metadata.timeout_ms,
                )
                self.spawn(self._abort_timed_out(metadata), f"abort timed out {tid}")

    async def _abort_timed_out(self, metadata: TransactionMetadata) -> None:
        try:
            partition, epoch = self.check_owner(metadata.transactional_id)
            if self.transactions.get(metadata.transactional_id) is metadata and metadata.pending is None:
                await self.fence_and_abort(metadata, partition, epoch)
        except ApiError as error:  # tried again at the next run
            log.warning(
                "transactional id %r: timed-out abort failed: %s", metadata.transactional_id, error.message
            )

    def remove_expired(self) -> None:
        """Remove the transactional ids without a transaction and not used for
        ``transactional.id.expiration.ms`` (a tombstone each)."""
        now = self.broker.clock.time_ms()
        for metadata in list(self.transactions.values()):
            if (
                metadata.state in COMPLETED
                and metadata.pending is None
                and metadata.last_update_ms + self.id_expiration_ms < now
            ):
                self.spawn(self._remove(metadata), f"expire {metadata.transactional_id}")

    async def _remove(self, metadata: TransactionMetadata) -> None:
        try:
            partition, epoch = self.check_owner(metadata.transactional_id)
            if self.transactions.get(metadata.transactional_id) is metadata and metadata.pending is None:
                await self.transition(metadata, None, partition, epoch)
                log.info("transactional id %r expired", metadata.transactional_id)
        except ApiError as error:
            log.warning("transactional id %r: expiry failed: %s", metadata.transactional_id, error.message)

    # -- tasks ---------------------------------------------------------------------------------
    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=f"kctl-txn-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task %s failed", task.get_name(), exc_info=task.exception())

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.markers.close()

"""The replica fetcher: how a follower copies its leaders' logs.

One ``ReplicaFetcher`` (one asyncio task, one ``BrokerChannel``) per source broker fetches every
partition this broker follows there. A partition added for a new leader epoch is first truncated
(KIP-101/KIP-279): OffsetForLeaderEpoch with the follower's latest epoch; when the leader answers
that epoch, truncate to min(its end offset, the follower's end offset of it); when it answers an
older epoch the follower knows, truncate to the follower's end of that epoch and ask again with it;
an epoch the follower does not know, or a follower without epochs, falls back to the high watermark.
Then Fetch (replica_id = this broker, current_leader_epoch, from the log end offset, long polling
``replica.fetch.wait.max.ms``) over an incremental fetch session (KIP-227, fetch_session_handler:
only partitions whose fetch offset moved are listed, so an idle follower's fetch names none) and
``append_as_follower``; the follower's high watermark is
min(the leader's, its own log end offset), and consumers' fetches parked on this follower (KIP-392)
wake when it moves. OFFSET_OUT_OF_RANGE asks the leader's log end and start
(ListOffsets as a replica): truncate to a lower leader end, or start over at a higher leader start.
FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH and connection failures back the
partition (or the whole fetcher) off for ``replica.fetch.backoff.ms`` until metadata changes it.
A leader that cannot be reached is logged at WARNING once, then at most once a minute with the count
of failures, and at INFO when a request to it succeeds again (kctl.common.ratelimit, one state per
source broker for the whole ``ReplicaFetcherManager``); an unexpected partition error likewise, per
partition.
Partitions whose topic names this replica in ``follower.replication.throttled.replicas`` are left
out of the fetches while ``follower.replication.throttled.rate`` is exceeded
(kctl.broker.replication.throttle)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kctl.broker.partition import Partition
from kctl.broker.replication.channel import BrokerChannel, ChannelError
from kctl.broker.replication.throttle import ReplicationQuota, is_throttled
from kctl.common.ratelimit import RepeatedFailures
from kctl.common.topic_partition import TopicPartition
from kctl.log.files import LogStorageError
from kctl.protocol.errors import ErrorCode, error_name
from kctl.protocol.fetch_session_handler import FetchData, FetchSessionHandler
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kctl.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kctl.protocol.registry import ApiKey
from kctl.records.header import LOG_OVERHEAD, MIN_BATCH_LENGTH, InvalidRecordBatch, iter_headers, read_prefix

log = logging.getLogger("kctl.broker.replication")

FETCH_VERSION = 11  # replica_id, current_leader_epoch (v9+), topic names (before v13), not flexible
OFFSET_FOR_LEADER_EPOCH_VERSION = 3  # replica_id (v3+), current_leader_epoch (v2+)
LIST_OFFSETS_VERSION = 4  # current_leader_epoch (v4+)
LATEST, EARLIEST = -1, -2
_PARTITION_ERRORS_TO_WAIT_ON = {
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    broker_id: int
    wait_max_ms: int = 500
    #: replica.socket.timeout.ms: a fetch unanswered this long fails (the connection is dropped)
    socket_timeout_ms: int = 30000
    min_bytes: int = 1
    max_bytes: int = 1024 * 1024
    response_max_bytes: int = 10 * 1024 * 1024
    backoff_ms: int = 1000
    #: follower.replication.throttled.rate, for the replicas the topics name (replication.throttle)
    quota: ReplicationQuota | None = None
    #: told of a follower append that failed because the disk did (the broker's log dir failure)
    on_disk_failure: Callable[[Path, LogStorageError], None] | None = None


@dataclass(slots=True)
class FetchState:
    partition: Partition
    leader_epoch: int
    needs_truncation: bool = True
    delayed_until: float = 0.0
    leader_high_watermark: int = -1  # from the last fetch response (the replica fetcher's lag metric)
    #: what the last fetch said of the partition, and the log and its offsets version it came from
    fetch_data: FetchData | None = None
    fetch_data_log: object = None
    fetch_data_version: int = -1

    def wanted(self, max_bytes: int) -> FetchData:
        """What the next fetch says of the partition: (fetch offset = log end offset, leader epoch,
        log start offset, max bytes), taken again from the log only when its offsets moved."""
        plog = self.partition.log
        data = self.fetch_data
        if (
            data is None
            or plog is not self.fetch_data_log
            or plog.offsets_version != self.fetch_data_version
            or data[3] != max_bytes
        ):
            data = (plog.log_end_offset, self.leader_epoch, plog.log_start_offset, max_bytes)
            self.fetch_data, self.fetch_data_log = data, plog
            self.fetch_data_version = plog.offsets_version
        return data


def whole_batches(data: memoryview) -> memoryview:
    """The longest prefix of ``data`` made of whole batches (a fetch response may end in part of one)."""
    position, size = 0, len(data)
    while size - position >= LOG_OVERHEAD:
        _base, length = read_prefix(data, position)
        if length < MIN_BATCH_LENGTH or position + LOG_OVERHEAD + length > size:
            break
        position += LOG_OVERHEAD + length
    return data[:position]


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one source broker."""

    def __init__(
        self,
        source_id: int,
        channel: BrokerChannel,
        settings: FetcherSettings,
        *,
        unreachable: RepeatedFailures | None = None,
        partition_errors: RepeatedFailures | None = None,
    ) -> None:
        self.source_id = source_id
        self.channel = channel
        self.settings = settings
        #: the lines about this leader not answering, shared by the fetchers of one broker
        self.unreachable = unreachable if unreachable is not None else RepeatedFailures(log)
        self.partition_errors = partition_errors if partition_errors is not None else RepeatedFailures(log)
        self.partitions: dict[TopicPartition, FetchState] = {}
        #: this follower's incremental fetch session with the source broker (KIP-227)
        self.session = FetchSessionHandler()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        #: when the source broker last answered (or this fetcher had nothing to ask it): monotonic
        self.last_answer = time.monotonic()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"kctl-fetcher-{self.source_id}"
        )

    def add(self, partition: Partition, leader_epoch: int) -> None:
        tp = partition.topic_partition
        current = self.partitions.get(tp)
        if current is not None and current.leader_epoch == leader_epoch and current.partition is partition:
            return
        self.partitions[tp] = FetchState(partition, leader_epoch)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def close(self) -> None:
        """Stop fetching: the loop ends at its next turn even if a cancellation were lost, the
        request in flight fails with the channel, and the task is waited for."""
        self._closing = True
        self._wakeup.set()
        task = self._task
        if task is not None:
            task.cancel()
        await self.channel.close()
        if task is not None:
            await asyncio.wait({task})

    # -- the loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = self.settings.backoff_ms / 1000
        while not self._closing:
            now = time.monotonic()
            ready = {tp: s for tp, s in self.partitions.items() if s.delayed_until <= now}
            if not ready:
                self.last_answer = now  # nothing asked, so nothing unanswered
                delays = [s.delayed_until - now for s in self.partitions.values()]
                self._wakeup.clear()
                # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the result when a
                # cancellation arrives as the awaited thing completes, and the loop went on
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(delays) if delays else None):
                        await self._wakeup.wait()
                continue
            try:
                to_truncate = {tp: s for tp, s in ready.items() if s.needs_truncation}
                if to_truncate:
                    await self._truncate(to_truncate)
                else:
                    await self._fetch(ready)
                self.last_answer = time.monotonic()
                if self.unreachable.failing(self.source_id):
                    where = f"broker {self.source_id} at {self._address}"
                    self.unreachable.recovered(self.source_id, f"{where} reachable")
            except ChannelError as error:
                if self._closing:
                    return
                where = f"broker {self.source_id} at {self._address}"
                self.unreachable.failed(self.source_id, f"cannot reach {where}", error)
                await asyncio.sleep(backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for broker %d failed; retrying", self.source_id)
                await asyncio.sleep(backoff)

    @property
    def _address(self) -> str:
        return f"{self.channel.host}:{self.channel.port}"

    def _delay(self, state: FetchState) -> None:
        state.delayed_until = time.monotonic() + self.settings.backoff_ms / 1000

    def _current(self, tp: TopicPartition, state: FetchState) -> bool:
        """Whether ``state`` is still what this fetcher should do for ``tp`` (not replaced meanwhile)."""
        return self.partitions.get(tp) is state

    # -- truncation (KIP-101/KIP-279) ----------------------------------------------------------
    async def _truncate(self, states: dict[TopicPartition, FetchState]) -> None:
        asking: dict[TopicPartition, tuple[FetchState, int]] = {}
        for tp, state in states.items():
            plog = state.partition.log
            epoch = plog.latest_epoch
            if epoch < 0:  # no epoch known: fall back to the high watermark
                self._truncate_to(state, plog.high_watermark, "no leader epoch known")
                state.needs_truncation = False
                continue
            asking[tp] = (state, epoch)
        if not asking:
            return
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        for tp, (state, epoch) in asking.items():
            by_topic.setdefault(tp.topic, []).append(
                OffsetForLeaderPartition(
                    partition=tp.partition, current_leader_epoch=state.leader_epoch, leader_epoch=epoch
                )
            )
        request = OffsetForLeaderEpochRequest(
            replica_id=self.settings.broker_id,
            topics=[OffsetForLeaderTopic(topic=t, partitions=p) for t, p in by_topic.items()],
        )
        response = await self.channel.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, request
        )
        for topic in response.topics:
            for answer in topic.partitions:
                tp = TopicPartition(topic.topic, answer.partition)
                entry = asking.get(tp)
                if entry is None or not self._current(tp, entry[0]):
                    continue
                state, _asked = entry
                if answer.error_code:  # the leader has not caught up with the metadata yet: routine
                    log.debug("%s: OffsetForLeaderEpoch: %s", tp, error_name(answer.error_code))
                    self._delay(state)
                    continue
                self._apply_epoch_end(state, answer.leader_epoch, answer.end_offset)

    def _apply_epoch_end(self, state: FetchState, leader_epoch: int, end_offset: int) -> None:
        plog = state.partition.log
        if end_offset < 0:  # the leader does not know the epoch: fall back to the high watermark
            self._truncate_to(state, plog.high_watermark, "the leader knows no such epoch")
            state.needs_truncation = False
            return
        local_epoch, local_end = plog.end_offset_for_epoch(leader_epoch)
        if local_epoch < 0 or local_epoch == leader_epoch:
            bound = end_offset if local_epoch < 0 else min(end_offset, local_end)
            self._truncate_to(
                state, min(bound, plog.log_end_offset), f"epoch {leader_epoch} ends at {end_offset}"
            )
            state.needs_truncation = False
            return
        # the leader answered an older epoch than asked, one this follower does not have: cut to the
        # end of the follower's own epoch before it and ask again with that one
        self._truncate_to(state, min(local_end, plog.log_end_offset), f"diverged before epoch {leader_epoch}")

    def _truncate_to(self, state: FetchState, offset: int, why: str) -> None:
        plog = state.partition.log
        if offset < plog.log_end_offset:
            log.info(
                "%s: truncating from %d to %d (%s)",
                state.partition.topic_partition,
                plog.log_end_offset,
                offset,
                why,
            )
            plog.truncate_to(offset)

    # -- fetching ------------------------------------------------------------------------------
    def _throttled(self, states: dict[TopicPartition, FetchState]) -> set[TopicPartition]:
        """The partitions whose topic names this broker's replica in
        follower.replication.throttled.replicas."""
        broker_id = self.settings.broker_id
        return {
            tp
            for tp, state in states.items()
            if is_throttled(
                state.partition.log.config.follower_replication_throttled_replicas, tp.partition, broker_id
            )
        }

    async def _fetch(self, states: dict[TopicPartition, FetchState]) -> None:
        settings = self.settings
        quota = settings.quota
        throttled = self._throttled(states) if quota is not None and quota.limited else set()
        if throttled and quota is not None and quota.exceeded():  # Kafka: leave them out of this fetch
            quota.hold_back(", ".join(sorted(str(tp) for tp in throttled)))
            states = {tp: s for tp, s in states.items() if tp not in throttled}
            if not states:
                await asyncio.sleep(quota.wait_s())
                return
        max_bytes = settings.max_bytes
        wanted = {tp: state.wanted(max_bytes) for tp, state in states.items()}
        session = self.session
        session_id, epoch, to_send, forgotten = session.next_request(wanted)
        by_topic: dict[str, list[FetchPartition]] = {}
        for tp, (fetch_offset, leader_epoch, log_start_offset, max_bytes) in to_send.items():
            by_topic.setdefault(tp.topic, []).append(
                FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=leader_epoch,
                    fetch_offset=fetch_offset,
                    log_start_offset=log_start_offset,
                    partition_max_bytes=max_bytes,
                )
            )
        forgotten_by_topic: dict[str, list[int]] = {}
        for tp in forgotten:
            forgotten_by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = FetchRequest(
            replica_id=settings.broker_id,
            max_wait_ms=settings.wait_max_ms,
            min_bytes=settings.min_bytes,
            max_bytes=settings.response_max_bytes,
            isolation_level=0,
            session_id=session_id,
            session_epoch=epoch,
            topics=[FetchTopic(topic=t, partitions=p) for t, p in by_topic.items()],
            forgotten_topics_data=[
                ForgottenTopic(topic=t, partitions=p) for t, p in forgotten_by_topic.items()
            ],
            rack_id="",
        )
        try:
            response = await self.channel.request(
                ApiKey.FETCH, FETCH_VERSION, request, timeout=settings.socket_timeout_ms / 1000
            )
        except BaseException:
            session.reset()  # whether the leader took this epoch is unknown: start a new session
            raise
        if not session.response(wanted, epoch, response.error_code, response.session_id):
            log.debug("fetch session with broker %d: %s", self.source_id, error_name(response.error_code))
            return  # the next fetch is a full one
        if response.error_code:
            log.info("fetch from broker %d: %s", self.source_id, error_name(response.error_code))
            for state in states.values():
                self._delay(state)
            return
        out_of_range: list[tuple[TopicPartition, FetchState]] = []
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                found = states.get(tp)
                if found is None or not self._current(tp, found):
                    continue
                state = found
                code = data.error_code
                if code == ErrorCode.NONE:
                    if tp in throttled and quota is not None and data.records is not None:
                        quota.record(len(data.records))
                    self._append(state, data.records, data.high_watermark, data.log_start_offset)
                    if self.partition_errors.failing(tp):
                        what = f"{tp}: fetching from broker {self.source_id} works"
                        self.partition_errors.recovered(tp, what)
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((tp, state))
                else:
                    if code not in _PARTITION_ERRORS_TO_WAIT_ON:
                        what = f"{tp}: fetch from broker {self.source_id} fails"
                        self.partition_errors.failed(tp, what, error_name(code))
                    self._delay(state)
        for tp, state in out_of_range:
            await self._handle_out_of_range(tp, state)

    def _append(self, state: FetchState, records: object, high_watermark: int, log_start_offset: int) -> None:
        partition = state.partition
        plog = partition.log
        tp = partition.topic_partition
        if records is not None and len(records):  # type: ignore[arg-type]
            data = whole_batches(memoryview(records).cast("B"))  # type: ignore[arg-type]
            # skip whole batches below our log end (never expected: fetches start at a batch boundary)
            end = plog.log_end_offset
            start = 0
            try:
                for position, header in iter_headers(data):
                    if header.last_offset >= end:
                        break
                    start = position + header.size
            except InvalidRecordBatch:
                pass
            data = data[start:]
            if len(data):
                try:
                    plog.append_as_follower(data)
                except (InvalidRecordBatch, LogStorageError) as error:
                    log.error("%s: follower append failed: %s", tp, error)
                    if (
                        isinstance(error, LogStorageError)
                        and error.disk_failed
                        and self.settings.on_disk_failure
                    ):
                        self.settings.on_disk_failure(plog.directory.parent, error)
                    self._delay(state)
                    return
        if high_watermark >= 0:
            state.leader_high_watermark = high_watermark
            partition.follow_high_watermark(high_watermark)  # wakes consumers parked here (KIP-392)
        if log_start_offset > plog.log_start_offset:  # DeleteRecords on the leader: follow it
            plog.maybe_increment_log_start_offset(min(log_start_offset, plog.high_watermark))

    async def _handle_out_of_range(self, tp: TopicPartition, state: FetchState) -> None:
        plog = state.partition.log
        leader_end = await self._leader_offset(tp, state, LATEST)
        if leader_end is None or not self._current(tp, state):
            return
        if leader_end < plog.log_end_offset:
            self._truncate_to(state, leader_end, f"the leader's log ends at {leader_end}")
            return
        leader_start = await self._leader_offset(tp, state, EARLIEST)
        if leader_start is None or not self._current(tp, state):
            return
        if leader_start > plog.log_end_offset:
            log.info("%s: the leader's log starts at %d: starting over there", tp, leader_start)
            plog.truncate_fully_and_start_at(leader_start)

    async def _leader_offset(self, tp: TopicPartition, state: FetchState, timestamp: int) -> int | None:
        request = ListOffsetsRequest(
            replica_id=self.settings.broker_id,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name=tp.topic,
                    partitions=[
                        ListOffsetsPartition(
                            partition_index=tp.partition,
                            current_leader_epoch=state.leader_epoch,
                            timestamp=timestamp,
                        )
                    ],
                )
            ],
        )
        response = await self.channel.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, request)
        for topic in response.topics:
            for answer in topic.partitions:
                if answer.error_code:
                    log.debug("%s: ListOffsets: %s", tp, error_name(answer.error_code))
                    self._delay(state)
                    return None
                return int(answer.offset)
        self._delay(state)
        return None


ChannelFactory = Callable[[int], BrokerChannel | None]


class ReplicaFetcherManager:
    """The fetchers of one broker, one per source broker, created and closed as partitions move."""

    def __init__(self, settings: FetcherSettings, channel_for: ChannelFactory) -> None:
        self.settings = settings
        self._channel_for = channel_for
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._source_of: dict[TopicPartition, int] = {}
        self.closed = False
        # outlive the fetchers (closed when idle, made again): one outage, one WARNING
        self._unreachable = RepeatedFailures(log)
        self._partition_errors = RepeatedFailures(log)

    def add_partition(self, partition: Partition, leader_id: int, leader_epoch: int) -> None:
        """Fetch ``partition`` from ``leader_id`` at ``leader_epoch`` (truncating first)."""
        tp = partition.topic_partition
        if self.closed:
            return  # stopping: no new fetcher (metadata changes may still arrive meanwhile)
        if self._source_of.get(tp) not in (None, leader_id):
            self.remove_partition(tp)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            channel = self._channel_for(leader_id)
            if channel is None:
                log.warning("%s: leader %d has no known endpoint; not fetching", tp, leader_id)
                return
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(
                leader_id,
                channel,
                self.settings,
                unreachable=self._unreachable,
                partition_errors=self._partition_errors,
            )
            fetcher.start()
        fetcher.add(partition, leader_epoch)
        self._source_of[tp] = leader_id

    def remove_partition(self, tp: TopicPartition) -> None:
        source = self._source_of.pop(tp, None)
        if source is not None and (fetcher := self.fetchers.get(source)) is not None:
            fetcher.remove(tp)

    def fetching(self, tp: TopicPartition) -> int | None:
        return self._source_of.get(tp)

    def unanswered_sources(self, now: float, longer_than_s: float) -> set[int]:
        """The source brokers that have partitions to give this broker and have not answered it
        for longer than ``longer_than_s`` (``now``: time.monotonic())."""
        return {
            source
            for source, fetcher in self.fetchers.items()
            if fetcher.partitions and now - fetcher.last_answer > longer_than_s
        }

    def retarget(self, endpoint_of: Callable[[int], tuple[str, int] | None]) -> None:
        """Point each fetcher at its source broker's registered address (after a metadata
        refresh): a leader that came back on another address is fetched there, not at the old one.
        ``endpoint_of``: the inter-broker host and port of a broker, None while it is unregistered."""
        for source, fetcher in self.fetchers.items():
            endpoint = endpoint_of(source)
            if endpoint is not None:
                fetcher.channel.retarget(*endpoint)

    async def shutdown_idle(self) -> None:
        """Close the fetchers left without partitions."""
        for source in list(self.fetchers):
            fetcher = self.fetchers.get(source)
            if fetcher is not None and not fetcher.partitions:  # re-checked after each await
                del self.fetchers[source]
                await fetcher.close()

    async def close(self) -> None:
        """Close every fetcher; from now on none is created."""
        self.closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._source_of.clear()
        await asyncio.gather(*(f.close() for f in fetchers), return_exceptions=True)

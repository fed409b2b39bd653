"""Fetch: file regions of each requested partition, sent with sendfile; long polling until ``min_bytes``
are available or ``max_wait_ms`` passes, woken as soon as a partition gets data.

Fetch sessions (KIP-227, v7+, kctl.broker.fetch_session): the request's session id and epoch give
a context — the partitions to read (those of the request, or of the incremental session) and which
of them the response carries; a session error is answered at once, in the response's error code.
Each partition is read by ``ReplicaManager.fetch``. A fetch with a replica id (>= 0) comes from a
follower: it is served up to the log end offset, its fetch offset is recorded as the follower's log
end offset (which may advance the high watermark and add the follower to the ISR); consumers read
up to the high watermark, or with isolation level 1 (READ_COMMITTED, v4+) up to the last stable
offset, and are then sent the aborted transactions overlapping [fetch offset, last stable offset)
from the log's transaction indexes (an empty list when none; null for READ_UNCOMMITTED). Every
partition answers with its last stable offset (the high watermark when no transaction is open). A
current leader epoch older than the partition's is FENCED_LEADER_EPOCH, a newer one
UNKNOWN_LEADER_EPOCH.

Fetch from the closest replica (KIP-392, v11+): a consumer's fetch carries its ``rack_id``
(``client.rack``) and may be sent to a follower, which serves it up to its own high watermark (an
offset past it but within its log: no records yet; past its log end, or before its log start:
OFFSET_OUT_OF_RANGE; a broker that is no replica: NOT_LEADER_OR_FOLLOWER; the same leader epoch
checks). A leader with ``replica.selector.class`` set may answer a partition with a
``preferred_read_replica`` (kctl.broker.replica_selector) and no records; such a response goes out at
once, without waiting for ``min_bytes``. Consumers before v11, and every fetch to a broker without a
selector, are served by the leader (``preferred_read_replica`` -1).

A fetch parks for at most ``fetch.wait.max.ms`` (a longer ``max_wait_ms`` is capped). A parked fetch
whose connection closes is cancelled by the server (kctl.broker.server); ``PARKED`` counts the fetches
parked in this process, and each park and unpark is logged at DEBUG with that count.

Versions: v0-17. v0-3 are answered to consumers in the message formats before RecordBatch (magic 0
for v0-1, magic 1 for v2-3; :mod:`kctl.records.downconvert`, read into memory instead of sendfile), as
Kafka down-converts for clients older than 0.11. v3+ bound the response by max_bytes; v4+ carry the
isolation level and answer with the last stable offset and aborted transactions; v5+ with the log
start offset; v7+ carry fetch sessions; v12+ are flexible; v13+ name topics by topic id instead of
name."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.fetch_session import CachedPartition, FetchContext
from kctl.broker.idle_followers import settled, still_idle
from kctl.broker.quotas import FETCH, throttle_request
from kctl.broker.replica_manager import PartitionRead
from kctl.log.naming import TopicPartition
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from kctl.protocol.registry import ApiKey
from kctl.records.downconvert import down_convert, magic_for_fetch_version

if TYPE_CHECKING:
    from kctl.broker.handler_services import FetchServices
    from kctl.broker.partition import Partition
    from kctl.broker.request_context import RequestContext
    from kctl.log.files import FileRegion

log = logging.getLogger("kctl.broker.fetch")

FIRST_SESSION_VERSION = 7
FIRST_TOPIC_ID_VERSION = 13
FIRST_REPLICA_STATE_VERSION = 15  # the follower's id moves into replica_state
FIRST_ISOLATION_VERSION = 4
FIRST_LOG_START_VERSION = 5  # a follower's fetch carries its log start offset
FIRST_RACK_VERSION = 11  # KIP-392: the consumer's rack; consumers may fetch from followers
FIRST_RECORD_BATCH_FETCH = 4  # v0-3 answer consumers in the old message formats (down-converted)
READ_COMMITTED = 1


class _Parked:
    """The number of fetches parked (long-polling) in this process."""

    count = 0


PARKED = _Parked()
_UNKNOWN_TOPIC_ID = PartitionRead(ErrorCode.UNKNOWN_TOPIC_ID)
_DENIED = PartitionRead(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _replica_id(request: FetchRequest, version: int) -> int:
    """The fetching follower's broker id; negative for a consumer."""
    if version < FIRST_REPLICA_STATE_VERSION:
        return int(request.replica_id)
    state = request.replica_state
    return int(state.replica_id) if state is not None else -1


def _fetch_context(
    broker: FetchServices, request: FetchRequest, version: int, follower: bool
) -> FetchContext | int:
    """The partitions this fetch reads and how its response is chosen (kctl.broker.fetch_session), or
    the session error to answer with."""
    by_id = version >= FIRST_TOPIC_ID_VERSION
    metadata = broker.metadata
    partitions = []
    for topic in request.topics:
        topic_id = topic.topic_id
        key: object = topic_id if by_id else topic.topic
        name = metadata.topic_name(topic_id) if by_id else topic.topic
        for part in topic.partitions:
            index = part.partition
            partitions.append(
                CachedPartition(
                    (key, index),
                    None if name is None else TopicPartition(name, index),
                    topic_id,
                    part.fetch_offset,
                    part.current_leader_epoch,
                    part.partition_max_bytes,
                    part.log_start_offset if follower and version >= FIRST_LOG_START_VERSION else -1,
                )
            )
    if version < FIRST_SESSION_VERSION:
        return FetchContext(partitions)
    forgotten: list[tuple[object, int]] = [
        (topic.topic_id if by_id else topic.topic, index)
        for topic in request.forgotten_topics_data
        for index in topic.partitions
    ]
    return broker.fetch_sessions.new_context(
        request.session_id,
        request.session_epoch,
        partitions,
        forgotten,
        privileged=follower,
        uses_topic_ids=by_id,
    )


def _read_all(
    broker: FetchServices,
    partitions: list[CachedPartition],
    max_bytes: int,
    replica_id: int,
    committed: bool,
    denied: frozenset[str],
    client_rack: str | None,
) -> tuple[list[tuple[CachedPartition, PartitionRead]], int, list[Partition], bool]:
    """One pass over the partitions: (each partition read with its read, bytes found, partitions
    read, whether to answer now: an error, or a preferred read replica named). In a follower's
    session, a partition idle since its last read (kctl.broker.idle_followers) is not read again: the
    follower is stamped caught up and the partition left out of the reads (an incremental response
    would not carry it)."""
    replicas = broker.replicas
    fetch = replicas.fetch
    follower = replica_id >= 0
    hosted_now = replicas.partitions
    now_ms = replicas.now_ms() if follower else 0
    fenced = replicas.fenced
    remaining = max_bytes
    total = 0
    answer_now = False
    hosted = []
    reads = []
    for cached in partitions:
        tp = cached.topic_partition
        idle = cached.idle
        if tp is None:
            read = _UNKNOWN_TOPIC_ID
        elif denied and tp.topic in denied:
            read = _DENIED
        elif (
            idle is not None
            and not fenced
            and still_idle(
                idle,
                hosted_now.get(tp),
                cached.high_watermark,
                cached.last_stable_offset,
                cached.log_start_offset,
                now_ms,
            )
        ):
            hosted.append(idle.partition)
            continue
        else:
            read = fetch(
                tp,
                cached.fetch_offset,
                min(cached.max_bytes, remaining),
                current_leader_epoch=cached.current_leader_epoch,
                replica_id=replica_id,
                read_committed=committed,
                min_one_batch=total == 0,
                client_rack=client_rack,
                log_start_offset=cached.fetcher_log_start_offset,
            )
            if follower:
                cached.idle = settled(read, replica_id, cached.fetch_offset)
        reads.append((cached, read))
        if read.error_code:
            answer_now = True
            continue
        if read.preferred_read_replica >= 0:
            answer_now = True
        if read.partition is not None:  # set on every read without error
            hosted.append(read.partition)
        records = read.records
        if records is not None:
            total += records.size
            remaining -= records.size
    return reads, total, hosted, answer_now


def _release(reads: list[tuple[CachedPartition, PartitionRead]]) -> None:
    for _, read in reads:
        if read.records is not None:
            read.records.release()


def _denied_topics(
    broker: FetchServices, context: RequestContext, partitions: list[CachedPartition], follower: bool
) -> frozenset[str]:
    """Topics the request may not read: a consumer needs READ on each, a follower CLUSTER_ACTION."""
    if not broker.security.authorizer.enabled:
        return frozenset()
    names = {c.topic_partition.topic for c in partitions if c.topic_partition is not None}
    if follower:
        if context.allowed(AclOperation.CLUSTER_ACTION, AclResourceType.CLUSTER, CLUSTER_NAME):
            return frozenset()
        return frozenset(names)
    read = AclOperation.READ
    return frozenset(n for n in names if not context.allowed(read, AclResourceType.TOPIC, n))


@api_handler(ApiKey.FETCH, versions=(0, 17))
async def handle(broker: FetchServices, context: RequestContext, request: FetchRequest) -> FetchResponse:
    version = context.header.api_version
    replica_id = _replica_id(request, version)
    follower = replica_id >= 0
    context.metric_name = "FetchFollower" if follower else "FetchConsumer"
    fetch = _fetch_context(broker, request, version, follower)
    if isinstance(fetch, int):  # a session error: answered at once, no partitions
        return FetchResponse(throttle_time_ms=0, error_code=fetch, session_id=0, responses=[])
    max_wait_ms = min(max(request.max_wait_ms, 0), broker.config["fetch.wait.max.ms"])
    deadline = time.monotonic() + max_wait_ms / 1000
    max_bytes = request.max_bytes if version >= 3 else 0x7FFFFFFF
    committed = (
        not follower and version >= FIRST_ISOLATION_VERSION and request.isolation_level == READ_COMMITTED
    )
    partitions = fetch.partitions
    denied = _denied_topics(broker, context, partitions, follower)
    rack = request.rack_id if version >= FIRST_RACK_VERSION and not follower else None
    while True:
        reads, total, hosted, now = _read_all(
            broker, partitions, max_bytes, replica_id, committed, denied, rack
        )
        remaining = deadline - time.monotonic()
        if total >= max(request.min_bytes, 1) or now or remaining <= 0 or not hosted:
            return _respond(broker, context, fetch, version, follower, reads, total)
        _release(reads)
        PARKED.count += 1
        log.debug(
            "fetch parked (%s:%d): %d fetch(es) parked",
            context.client_host,
            context.client_port,
            PARKED.count,
        )
        parked = time.monotonic()
        try:
            await broker.replicas.wait_for_append(hosted, remaining, follower=follower)
        finally:
            context.remote_time += time.monotonic() - parked
            PARKED.count -= 1
            log.debug(
                "fetch unparked (%s:%d): %d fetch(es) parked",
                context.client_host,
                context.client_port,
                PARKED.count,
            )
        if time.monotonic() >= deadline:
            reads, total, hosted, now = _read_all(
                broker, partitions, max_bytes, replica_id, committed, denied, rack
            )
            return _respond(broker, context, fetch, version, follower, reads, total)


def _count(broker: FetchServices, responses: list[FetchableTopicResponse], follower: bool) -> None:
    """The fetch's BrokerTopicMetrics: once per topic of the response (kctl.broker.metrics). Records
    out are what the log read says each partition's region holds whole from the fetch offset on (no
    record is looked at)."""
    stats = broker.metrics.stats
    for topic in responses:
        failed = nbytes = records_out = 0
        for partition in topic.partitions:
            if partition.error_code:
                failed += 1
            else:
                records = partition.records
                if isinstance(records, (bytes, bytearray, memoryview)):
                    nbytes += len(records)
                else:
                    nbytes += records.size
                    records_out += records.records_out
        if topic.topic:
            known = failed < len(topic.partitions) or broker.metadata.topic(topic.topic) is not None
            stats.fetched(
                topic.topic,
                len(topic.partitions),
                failed,
                nbytes,
                follower=follower,
                known=known,
                records=records_out,
            )


def _responses(
    fetch: FetchContext,
    reads: list[tuple[CachedPartition, PartitionRead]],
    legacy_magic: int | None = None,
) -> list[FetchableTopicResponse]:
    """The response's topics: every partition read, or for an incremental session those with
    something new (the rest released unsent); consecutive partitions of a topic share its entry.
    ``legacy_magic`` (Fetch v0-3 from a consumer): the records are read and down-converted to that
    message format instead of being sent as file regions."""
    incremental = fetch.incremental
    responses: list[FetchableTopicResponse] = []
    current_key: object = None
    current: list[PartitionData] = []
    with_records = []
    for cached, read in reads:
        records = read.records
        size = records.size if records is not None else 0
        changed = cached.changed(
            read.error_code,
            size,
            read.high_watermark,
            read.last_stable_offset,
            read.log_start_offset,
            read.preferred_read_replica,
        )
        if incremental and not changed:
            if records is not None:
                records.release()
            continue
        if size:
            with_records.append(cached)
        topic_key = cached.key[0]
        if topic_key != current_key or not responses:
            current_key, current = topic_key, []
            tp = cached.topic_partition
            responses.append(
                FetchableTopicResponse(
                    topic=tp.topic if tp is not None else "",
                    topic_id=cached.topic_id,
                    partitions=current,
                )
            )
        aborted = read.aborted
        txns = None
        if aborted is not None:
            txns = [
                AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset) for t in aborted
            ]
        error_code = read.error_code
        sent: FileRegion | bytes = records if records is not None else b""
        if legacy_magic is not None:
            error_code, sent = _down_converted(read, legacy_magic, cached.fetch_offset)
        current.append(
            PartitionData(
                partition_index=cached.key[1],
                error_code=error_code,
                high_watermark=read.high_watermark,
                last_stable_offset=read.last_stable_offset,
                log_start_offset=read.log_start_offset,
                aborted_transactions=txns,
                preferred_read_replica=read.preferred_read_replica,
                records=sent,
            )
        )
    fetch.moved_to_end(with_records)
    return responses


def _down_converted(read: PartitionRead, legacy_magic: int, fetch_offset: int) -> tuple[int, bytes]:
    """A partition's error code and records for a v0-3 consumer: its batches read and down-converted
    to the old message format (the region released); UNSUPPORTED_VERSION without records when the
    topic's ``message.downconversion.enable`` is false, as Kafka answers."""
    records = read.records
    if read.partition is not None and not read.partition.log.config.message_downconversion_enable:
        if records is not None:
            records.release()
        return ErrorCode.UNSUPPORTED_VERSION, b""
    if records is None:
        return read.error_code, b""
    try:
        data = records.read_bytes()
    finally:
        records.release()
    return read.error_code, down_convert(data, legacy_magic, fetch_offset)


def _respond(
    broker: FetchServices,
    context: RequestContext,
    fetch: FetchContext,
    version: int,
    follower: bool,
    reads: list[tuple[CachedPartition, PartitionRead]],
    total: int,
) -> FetchResponse:
    """The response, unless a consumer exceeds its consumer_byte_rate: then, as Kafka, no records
    (their bytes not counted), the throttle time, and no new session."""
    if not follower:
        throttle_time_ms = throttle_request(broker.quotas, FETCH, context, total)
        if throttle_time_ms:
            session = context.session
            broker.quotas.unrecord(
                FETCH, session.principal if session else None, context.header.client_id, total
            )
            _release(reads)
            session_id = fetch.session.id if fetch.session is not None else 0
            return FetchResponse(
                throttle_time_ms=throttle_time_ms, error_code=0, session_id=session_id, responses=[]
            )
    legacy_magic = (
        magic_for_fetch_version(version) if version < FIRST_RECORD_BATCH_FETCH and not follower else None
    )
    responses = _responses(fetch, reads, legacy_magic)
    _count(broker, responses, follower)
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=fetch.session_id(), responses=responses)

"""Fetch: file regions of each requested partition, sent with sendfile; long polling until ``min_bytes``
are available or ``max_wait_ms`` passes, woken as soon as a partition gets data.

No fetch sessions (a session id of 0 tells clients to send full requests). A fetch with a replica id (>=
0) comes from a follower: it is served up to the log end offset, its fetch offset is recorded as the
follower's log end offset (which may advance the high watermark and add the follower to the ISR);
consumers read up to the high watermark, or with isolation level 1 (READ_COMMITTED, v4+) up to the last
stable offset, and are then sent the aborted transactions overlapping [fetch offset, last stable offset)
from the log's transaction indexes (an empty list when none; null for READ_UNCOMMITTED). Every partition
answers with its last stable offset (the high watermark when no transaction is open). A current leader
epoch older than the partition's is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.

A fetch parks for at most ``fetch.wait.max.ms`` (a longer ``max_wait_ms`` is capped). A parked fetch
whose connection closes is cancelled by the server (kctl.broker.server); ``PARKED`` counts the fetches
parked in this process, and each park and unpark is logged at DEBUG with that count.

Versions: v0-17. v3+ bound the response by max_bytes; v4+ carry the isolation level and answer with the
last stable offset and aborted transactions; v5+ with the log start offset; v7+ carry fetch sessions
(answered with session id 0); v12+ are flexible; v13+ name topics by topic id instead of name."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.quotas import FETCH, throttle_request
from kctl.broker.replication.throttle import leader_throttles, record_leader_bytes
from kctl.broker.security.acls import allowed
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

if TYPE_CHECKING:
    from kctl.broker.broker import Broker
    from kctl.broker.server import RequestContext

log = logging.getLogger("kctl.broker.fetch")

FIRST_TOPIC_ID_VERSION = 13
FIRST_REPLICA_STATE_VERSION = 15  # the follower's id moves into replica_state
FIRST_ISOLATION_VERSION = 4
READ_COMMITTED = 1


class _Parked:
    """The number of fetches parked (long-polling) in this process."""

    count = 0


PARKED = _Parked()


def _error(index: int, code: int) -> PartitionData:
    return PartitionData(
        partition_index=index,
        error_code=code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        records=b"",
    )


def _replica_id(request: FetchRequest, version: int) -> int:
    """The fetching follower's broker id; negative for a consumer."""
    if version < FIRST_REPLICA_STATE_VERSION:
        return int(request.replica_id)
    state = request.replica_state
    return int(state.replica_id) if state is not None else -1


def _read_all(
    broker: Broker, request: FetchRequest, version: int, denied: frozenset[str] = frozenset()
) -> tuple[list[FetchableTopicResponse], int, list[Any], bool]:
    """One pass over the request: (topic responses, bytes found, partitions read, any error)."""
    remaining = request.max_bytes if version >= 3 else 0x7FFFFFFF
    replicas = broker.replicas
    replica_id = _replica_id(request, version)
    follower = replica_id >= 0
    committed = (
        not follower and version >= FIRST_ISOLATION_VERSION and request.isolation_level == READ_COMMITTED
    )
    total = 0
    errors = False
    hosted = []
    responses = []
    for topic in request.topics:
        name = topic.topic if version < FIRST_TOPIC_ID_VERSION else broker.metadata.topic_name(topic.topic_id)
        partitions = []
        for part in topic.partitions:
            if name is None:
                partitions.append(_error(part.partition, ErrorCode.UNKNOWN_TOPIC_ID))
                errors = True
                continue
            if name in denied:
                partitions.append(_error(part.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                errors = True
                continue
            try:
                partition = replicas.leader_partition(
                    TopicPartition(name, part.partition), part.current_leader_epoch
                )
                if follower:
                    replicas.record_follower_fetch(partition, replica_id, part.fetch_offset)
                hosted.append(partition)
                high_watermark = partition.high_watermark
                last_stable_offset = partition.log.last_stable_offset
                aborted = None
                region = None
                limit = min(part.partition_max_bytes, remaining)
                if follower and leader_throttles(broker.leader_quota, partition, replica_id):
                    pass  # leader.replication.throttled.rate exceeded: no records this time
                elif limit > 0 or total == 0:
                    region = replicas.read(
                        partition,
                        part.fetch_offset,
                        max(limit, 0),
                        total == 0,
                        follower=follower,
                        max_offset=last_stable_offset
                        if committed
                        else (None if follower else high_watermark),
                    )
                    if follower and region is not None:
                        record_leader_bytes(broker.leader_quota, partition, replica_id, region.size)
            except ApiError as error:
                partitions.append(_error(part.partition, error.code))
                errors = True
                continue
            if committed:
                aborted = (
                    [
                        AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
                        for txn in partition.log.aborted_transactions(part.fetch_offset, last_stable_offset)
                    ]
                    if region is not None
                    else []
                )
            size = region.size if region is not None else 0
            total += size
            remaining -= size
            partitions.append(
                PartitionData(
                    partition_index=part.partition,
                    error_code=0,
                    high_watermark=high_watermark,
                    last_stable_offset=last_stable_offset,
                    log_start_offset=partition.log_start_offset,
                    aborted_transactions=aborted,
                    records=region if region is not None else b"",
                )
            )
        responses.append(
            FetchableTopicResponse(topic=name or "", topic_id=topic.topic_id, partitions=partitions)
        )
    return responses, total, hosted, errors


def _release(responses: list[FetchableTopicResponse]) -> None:
    for topic in responses:
        for partition in topic.partitions:
            release = getattr(partition.records, "release", None)
            if release is not None and not isinstance(partition.records, memoryview):
                release()


def _denied_topics(
    broker: Broker, context: RequestContext, request: FetchRequest, version: int
) -> frozenset[str]:
    """Topics the request may not read: a consumer needs READ on each, a follower CLUSTER_ACTION."""
    security = getattr(broker, "security", None)
    if security is None or not security.authorizer.enabled:
        return frozenset()
    names = {
        t.topic if version < FIRST_TOPIC_ID_VERSION else broker.metadata.topic_name(t.topic_id)
        for t in request.topics
    }
    if _replica_id(request, version) >= 0:
        if allowed(broker, context, AclOperation.CLUSTER_ACTION, AclResourceType.CLUSTER, CLUSTER_NAME):
            return frozenset()
        return frozenset(n for n in names if n is not None)
    read = AclOperation.READ
    return frozenset(
        n for n in names if n is not None and not allowed(broker, context, read, AclResourceType.TOPIC, n)
    )


@api_handler(ApiKey.FETCH, versions=(0, 17))
async def handle(broker: Broker, context: RequestContext, request: FetchRequest) -> FetchResponse:
    version = context.header.api_version
    max_wait_ms = min(max(request.max_wait_ms, 0), broker.config["fetch.wait.max.ms"])
    deadline = time.monotonic() + max_wait_ms / 1000
    denied = _denied_topics(broker, context, request, version)
    while True:
        responses, total, hosted, errors = _read_all(broker, request, version, denied)
        remaining = deadline - time.monotonic()
        if total >= max(request.min_bytes, 1) or errors or remaining <= 0 or not hosted:
            return _respond(broker, context, request, version, responses, total)
        _release(responses)
        PARKED.count += 1
        log.debug(
            "fetch parked (%s:%d): %d fetch(es) parked",
            context.client_host,
            context.client_port,
            PARKED.count,
        )
        parked = time.monotonic()
        try:
            await broker.replicas.wait_for_append(hosted, remaining)
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
            responses, total, hosted, errors = _read_all(broker, request, version, denied)
            return _respond(broker, context, request, version, responses, total)


def _count(broker: Broker, responses: list[FetchableTopicResponse], follower: bool) -> None:
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


def _respond(
    broker: Broker,
    context: RequestContext,
    request: FetchRequest,
    version: int,
    responses: list[FetchableTopicResponse],
    total: int,
) -> FetchResponse:
    """The response, unless a consumer exceeds its consumer_byte_rate: then, as Kafka, no records
    (their bytes not counted) and the throttle time."""
    throttle_time_ms = 0
    follower = _replica_id(request, version) >= 0
    context.metric_name = "FetchFollower" if follower else "FetchConsumer"
    if not follower:
        throttle_time_ms = throttle_request(broker.quotas, FETCH, context, total)
        if throttle_time_ms:
            session = context.session
            broker.quotas.unrecord(
                FETCH, session.principal if session else None, context.header.client_id, total
            )
            _release(responses)
            responses = []
    _count(broker, responses, follower)
    return FetchResponse(throttle_time_ms=throttle_time_ms, error_code=0, session_id=0, responses=responses)

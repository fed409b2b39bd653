"""Talking to a group's coordinator: FindCoordinator, dedicated coordinator connections, and the
OffsetCommit/OffsetFetch encoding shared by group members (``membership``, ``committer``) and
admin calls (``admin``).

A member's group requests go over connections of their own (``CoordinatorChannel``), not the
pooled per-broker connections its fetches use, as Kafka's clients do: a JoinGroup waits for the whole
rebalance, and a broker answers a connection's requests in order, so sharing would hold up fetches
(and the fetches' long polls would hold up heartbeats). One connection per purpose ("join",
"heartbeat", "offsets"), each used by one thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.connection import BrokerConnection
from kctl.client.errors import BrokerResponseError, KafkaConnectionError, KafkaError, KafkaTimeoutError
from kctl.client.types import BrokerInfo
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kctl.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)

GROUP_KEY_TYPE = 0
COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)
"""Errors after which the coordinator is looked up again (load in progress: asked again later)."""


@dataclasses.dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed position: the offset of the next record to read, the commit's metadata string
    and the leader epoch of the last record read (-1: unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclasses.dataclass(frozen=True)
class CoordinatorResponse:
    """A coordinator's answer, and the version of the API the request was sent with."""

    version: int
    body: Any


@dataclasses.dataclass(frozen=True)
class FetchedOffsets:
    """What an OffsetFetch response says: the group's error code, each partition's committed offset
    (None: nothing committed) and the partitions' error codes (only those that failed)."""

    error_code: int
    offsets: dict[TopicPartition, OffsetAndMetadata | None]
    errors: dict[TopicPartition, int]


def as_offset(value: int | OffsetAndMetadata | tuple[Any, ...]) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        return value
    if isinstance(value, tuple):
        return OffsetAndMetadata(*value)
    return OffsetAndMetadata(int(value))


# ----------------------------------------------------------------------------------------- FindCoordinator


def find_coordinators(
    cluster: ClusterClient, group_ids: Iterable[str], *, deadline: Deadline, key_type: int = GROUP_KEY_TYPE
) -> dict[str, BrokerInfo | BrokerResponseError]:
    """The coordinator of each group (FindCoordinator, batched from v4), or the error the broker
    gave for it; with ``key_type`` 1, of each transactional id. Retriable errors (the offsets topic
    being created, a coordinator loading) are retried until the deadline."""
    what = "group" if key_type == GROUP_KEY_TYPE else "transactional id"
    pending = list(dict.fromkeys(group_ids))
    found: dict[str, BrokerInfo | BrokerResponseError] = {}

    def attempt() -> None:
        conn = cluster.any_connection(deadline=deadline)
        version = conn.version_for(ApiKey.FIND_COORDINATOR)
        timeout = deadline.timeout(cluster.config.request_timeout)
        answers: list[tuple[str, int, str | None, int, str, int]] = []
        if version >= 4:
            r = conn.request(
                ApiKey.FIND_COORDINATOR,
                FindCoordinatorRequest(key_type=key_type, coordinator_keys=list(pending)),
                version,
                timeout=timeout,
            )
            answers = [
                (c.key, c.error_code, c.error_message, c.node_id, c.host, c.port) for c in r.coordinators
            ]
        else:
            for group_id in pending:
                r = conn.request(
                    ApiKey.FIND_COORDINATOR,
                    FindCoordinatorRequest(key=group_id, key_type=key_type),
                    version,
                    timeout=timeout,
                )
                answers.append(
                    (group_id, r.error_code, getattr(r, "error_message", None), r.node_id, r.host, r.port)
                )
        retry: list[str] = []
        for key, code, message, node_id, host, port in answers:
            if key not in pending:
                continue
            if code:
                error = BrokerResponseError(code, message, context=f"{what} {key!r}")
                found[key] = error
                if error.retriable:
                    retry.append(key)
            else:
                found[key] = BrokerInfo(node_id, host, port)
        for key in pending:
            if key not in found:
                found[key] = BrokerResponseError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, "FindCoordinator did not answer for it", context=key
                )
                retry.append(key)
        pending[:] = retry
        if retry:
            raise found[retry[0]]  # type: ignore[misc]

    with contextlib.suppress(BrokerResponseError):  # the groups still failing keep their error
        cluster.retry(attempt, deadline=deadline, description="FindCoordinator")
    return found


def find_coordinator(cluster: ClusterClient, group_id: str, *, deadline: Deadline) -> BrokerInfo:
    """The coordinator of one group; raises its ``BrokerResponseError``."""
    result = find_coordinators(cluster, [group_id], deadline=deadline)[group_id]
    if isinstance(result, BrokerResponseError):
        raise result
    return result


class CoordinatorChannel:
    """The coordinator of one group and dedicated connections to it, one per purpose.

    ``request`` finds the coordinator when it is not known; ``invalidate`` forgets it (after a
    coordinator error or a lost connection) and closes the connections."""

    def __init__(self, cluster: ClusterClient, group_id: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self._lock = threading.Lock()
        self._node: BrokerInfo | None = None
        self._conns: dict[str, BrokerConnection] = {}
        self._closed = False

    @property
    def node(self) -> BrokerInfo | None:
        """The coordinator, when known."""
        return self._node

    def coordinator(self, *, deadline: Deadline) -> BrokerInfo:
        node = self._node
        if node is None:
            node = find_coordinator(self.cluster, self.group_id, deadline=deadline)
            with self._lock:
                self._node = node
        return node

    def connection(self, purpose: str, *, deadline: Deadline) -> BrokerConnection:
        node = self.coordinator(deadline=deadline)
        with self._lock:
            if self._closed:
                raise KafkaConnectionError("the group member is closed")
            conn = self._conns.get(purpose)
            if conn is not None and not conn.closed and (conn.host, conn.port) == (node.host, node.port):
                return conn
        config = self.cluster.config
        conn = BrokerConnection(
            node.host,
            node.port,
            client_id=config.client_id,
            timeout=config.request_timeout,
            connect_timeout=deadline.timeout(config.connect_timeout),
            node_id=node.node_id,
            send_buffer_bytes=config.send_buffer_bytes,
            receive_buffer_bytes=config.receive_buffer_bytes,
            security=config.security,
        )
        with self._lock:
            old = self._conns.get(purpose)
            if old is not None:
                old.close()
            if self._closed:
                conn.close()
                raise KafkaConnectionError("the group member is closed")
            self._conns[purpose] = conn
        return conn

    def request(
        self,
        purpose: str,
        api_key: int,
        build: Callable[[int], Any],
        *,
        deadline: Deadline,
        timeout: float | None = None,
        min_version: int | None = None,
        max_version: int | None = None,
    ) -> CoordinatorResponse:
        """Send ``build(version)`` to the coordinator over the ``purpose`` connection; returns the
        response with the version used. ``timeout``: the wait for the response (default
        ``request.timeout.ms``, within the deadline). A lost connection or timeout forgets the
        coordinator and raises."""
        conn = self.connection(purpose, deadline=deadline)
        version = conn.version_for(api_key, min_version=min_version, max_version=max_version)
        wait = timeout if timeout is not None else self.cluster.config.request_timeout
        try:
            body = conn.request(api_key, build(version), version, timeout=max(wait, 0.001))
        except (KafkaConnectionError, KafkaTimeoutError):
            self.invalidate()
            raise
        return CoordinatorResponse(version, body)

    def invalidate(self) -> None:
        with self._lock:
            self._node = None
            conns, self._conns = self._conns, {}
        for conn in conns.values():
            _shutdown(conn)

    def close_purpose(self, purpose: str) -> None:
        """Close one connection (waking up a thread blocked on it)."""
        with self._lock:
            conn = self._conns.pop(purpose, None)
        if conn is not None:
            _shutdown(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.invalidate()


def _shutdown(conn: BrokerConnection) -> None:
    """Close a connection so that a thread blocked reading it wakes up (a plain close of the socket
    does not interrupt a ``recv`` under way in another thread)."""
    sock = getattr(conn, "_sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    conn.close()


def is_coordinator_error(error: KafkaError) -> bool:
    """Whether ``error`` means: find the coordinator again and retry."""
    if isinstance(error, BrokerResponseError):
        return error.code in COORDINATOR_ERRORS
    return isinstance(error, KafkaConnectionError | KafkaTimeoutError)


# ----------------------------------------------------------------------------------------- offsets


def offset_commit_request(
    version: int,
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> OffsetCommitRequest:
    """An OffsetCommit request (any version); generation -1 and member "" commit as an admin
    (allowed by the coordinator only while the group has no members)."""
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for tp, value in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=value.offset,
                committed_leader_epoch=value.leader_epoch,
                commit_timestamp=-1,
                committed_metadata=value.metadata,
            )
        )
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id if version >= 7 else None,
        retention_time_ms=-1,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def offset_commit_results(response: Any) -> dict[TopicPartition, int]:
    """The error code of each partition in an OffsetCommit response."""
    return {
        TopicPartition(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def offset_fetch_request(
    version: int, group_id: str, partitions: Iterable[TopicPartition] | None, *, require_stable: bool = True
) -> OffsetFetchRequest:
    """An OffsetFetch request for ``partitions`` (None: every partition the group has offsets for;
    needs v2+)."""
    by_topic: dict[str, list[int]] | None = None
    if partitions is not None:
        by_topic = {}
        for tp in sorted(set(partitions)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
    if version >= 8:
        topics = (
            None
            if by_topic is None
            else [OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        )
        return OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup(group_id=group_id, topics=topics)],
            require_stable=require_stable,
        )
    if by_topic is None and version < 2:
        raise ValueError("OffsetFetch below v2 cannot ask for all of a group's offsets")
    return OffsetFetchRequest(
        group_id=group_id,
        topics=None
        if by_topic is None
        else [OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
        require_stable=require_stable,
    )


def offset_fetch_results(version: int, response: Any, group_id: str) -> FetchedOffsets:
    """The group's error code, committed offsets and partition errors from an OffsetFetch
    response; an offset of -1 (nothing committed) is None."""
    if version >= 8:
        group = next((g for g in response.groups if g.group_id == group_id), None)
        if group is None:
            return FetchedOffsets(ErrorCode.UNKNOWN_SERVER_ERROR, {}, {})
        group_error, topics = group.error_code, group.topics
    else:
        group_error, topics = getattr(response, "error_code", 0) or 0, response.topics
    offsets: dict[TopicPartition, OffsetAndMetadata | None] = {}
    errors: dict[TopicPartition, int] = {}
    for t in topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            offsets[tp] = (
                OffsetAndMetadata(p.committed_offset, p.metadata or "", p.committed_leader_epoch)
                if p.committed_offset >= 0
                else None
            )
            if p.error_code:
                errors[tp] = p.error_code
    if not group_error and version < 2:
        # v0/v1 carry group errors (coordinator moved, loading) on every partition
        codes = {code for code in errors.values() if code in COORDINATOR_ERRORS}
        if codes:
            group_error = min(codes)
    return FetchedOffsets(group_error, offsets, errors)

"""Admin calls for consumer groups: list, describe (members, assignments, committed offsets, lag),
alter committed offsets, delete groups and offsets — what ``kafka-consumer-groups.sh`` and ``rpk
group`` do, as a library (resetting offsets by a strategy: ``kctl.client.group.rewind``).

::

    with AdminClient("127.0.0.1:9092") as admin:
        groups = GroupAdmin(admin)
        listed = groups.list_groups(states={"Stable"})
        [billing] = groups.describe_groups(["billing"])
        lag = groups.offsets_with_lag("billing")                # committed, log end, lag per partition
        groups.alter_offsets("billing", {TopicPartition("orders", 0): 42})   # OffsetCommit (generation -1)

Routing: ListGroups goes to every broker (each lists the groups it coordinates); DescribeGroups,
OffsetFetch, OffsetCommit, DeleteGroups and OffsetDelete to each group's coordinator (FindCoordinator,
batched); coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) are retried with a
fresh lookup until the deadline. Per-group and per-partition failures come back as results carrying
Kafka's error name, as the topic admin calls do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from kctl.client.admin import AdminClient, Result
from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.consumer_protocol import PROTOCOL_TYPE, Assignment, ConsumerProtocolError, Subscription
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group.coordinator import (
    COORDINATOR_ERRORS,
    CoordinatorResponse,
    OffsetAndMetadata,
    find_coordinators,
    offset_commit_request,
    offset_commit_results,
    offset_fetch_request,
    offset_fetch_results,
)
from kctl.client.types import BrokerInfo
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.delete_groups import DeleteGroupsRequest
from kctl.protocol.messages.describe_groups import DescribeGroupsRequest
from kctl.protocol.messages.list_groups import ListGroupsRequest
from kctl.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)

INACTIVE_STATES = frozenset({"Empty", "Dead"})
"""Group states in which offsets may be reset (no member could overwrite them)."""
STATES = ("Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead")
"""The classic group states, as ListGroups/DescribeGroups spell them."""


# ----------------------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class GroupListing:
    """A group as ListGroups names it, and the broker coordinating it."""

    group_id: str
    state: str | None
    protocol_type: str
    coordinator: int


@dataclasses.dataclass(frozen=True)
class MemberDescription:
    """A member of a group; ``assignment``/``topics`` are decoded for ``consumer`` groups."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()
    topics: tuple[str, ...] = ()
    """The topics of the member's subscription."""


@dataclasses.dataclass(frozen=True)
class GroupDescription(Result):
    """A group: state, protocol type, assignor (``protocol``), coordinator and members. A group the
    coordinator does not know is ``Dead`` with no members (``exists`` is False)."""

    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    coordinator: BrokerInfo | None = None
    members: tuple[MemberDescription, ...] = ()

    @property
    def group_id(self) -> str:
        return self.name

    @property
    def exists(self) -> bool:
        return self.ok and not (self.state == "Dead" and not self.members)

    @property
    def active(self) -> bool:
        """Whether the group has members (offsets must not be changed under them)."""
        return bool(self.members) or self.state not in INACTIVE_STATES


@dataclasses.dataclass(frozen=True)
class PartitionOffsets:
    """One partition of a group: committed offset (None: none), log start and end offsets, lag
    (end - committed, None without a committed offset), and the member it is assigned to."""

    topic_partition: TopicPartition
    committed: int | None
    log_start: int | None
    log_end: int | None
    member: MemberDescription | None = None
    metadata: str = ""
    error: str | None = None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed, 0)


@dataclasses.dataclass(frozen=True)
class OffsetDeleteResult:
    """The outcome of OffsetDelete: the group's error code, and each partition's (0: deleted)."""

    error_code: int
    partitions: dict[TopicPartition, int]


class GroupNotEmptyError(KafkaError):
    """The group has active members; its offsets cannot be reset (``group``: its description)."""

    def __init__(self, group: GroupDescription) -> None:
        self.group = group
        members = (
            ", ".join(f"{m.member_id} ({m.client_id}@{m.host})" for m in group.members)
            or "members are joining"
        )
        super().__init__(
            f"group {group.group_id!r} is {group.state} with {len(group.members)} active member(s): "
            f"{members}; stop them first"
        )


def decode_member(member: Any, protocol_type: str) -> MemberDescription:
    """A DescribeGroups member, with its assignment and subscription decoded when the group speaks
    the consumer protocol (undecodable bytes leave them empty)."""
    assignment: tuple[TopicPartition, ...] = ()
    topics: tuple[str, ...] = ()
    if protocol_type == PROTOCOL_TYPE:
        with contextlib.suppress(ConsumerProtocolError):
            assignment = tuple(sorted(Assignment.decode(member.member_assignment).partitions))
        if member.member_metadata:
            with contextlib.suppress(ConsumerProtocolError):
                topics = Subscription.decode(member.member_metadata).topics
    return MemberDescription(
        member_id=member.member_id,
        group_instance_id=getattr(member, "group_instance_id", None),
        client_id=member.client_id,
        host=member.client_host.lstrip("/"),
        assignment=assignment,
        topics=tuple(topics),
    )


class GroupAdmin:
    """Consumer-group admin operations over an ``AdminClient`` (or a ``ClusterClient``)."""

    def __init__(self, admin: AdminClient | ClusterClient) -> None:
        self.admin = admin if isinstance(admin, AdminClient) else AdminClient(admin)
        self.cluster = self.admin.cluster

    def _deadline(self, timeout: float | None) -> Deadline:
        return self.cluster.deadline(timeout)

    def _request_coordinator(
        self, group_id: str, api_key: int, build: Any, deadline: Deadline, *, min_version: int | None = None
    ) -> CoordinatorResponse:
        """One request to the group's coordinator (found first): its response and the version used."""
        found = find_coordinators(self.cluster, [group_id], deadline=deadline)[group_id]
        if isinstance(found, BrokerResponseError):
            raise found
        conn = self.cluster.connection(found.node_id, deadline=deadline)
        version = conn.version_for(api_key, min_version=min_version)
        response = conn.request(
            api_key, build(version), version, timeout=deadline.timeout(self.cluster.config.request_timeout)
        )
        return CoordinatorResponse(version, response)

    def _retry_coordinator(self, operation: Any, deadline: Deadline, what: str) -> Any:
        """Run ``operation`` until it succeeds; coordinator errors (raised as BrokerResponseError)
        and lost connections are retried until the deadline."""
        return self.cluster.retry(operation, deadline=deadline, description=what)

    # ------------------------------------------------------------------------------ list

    def list_groups(
        self, *, states: Collection[str] | None = None, timeout: float | None = None
    ) -> list[GroupListing]:
        """Every group of the cluster (ListGroups to every broker), sorted by id; ``states``
        filters by state (case-insensitive; asked of the broker from ListGroups v4)."""
        deadline = self._deadline(timeout)
        wanted = {s.lower() for s in states} if states else None
        metadata = self.cluster.retry(
            lambda: self.cluster.refresh_metadata([], deadline=deadline), deadline=deadline
        )
        listings: dict[str, GroupListing] = {}
        errors: list[BaseException] = []
        for node_id in sorted(metadata.brokers):

            def call(node_id: int = node_id) -> Any:
                conn = self.cluster.connection(node_id, deadline=deadline)
                version = conn.version_for(ApiKey.LIST_GROUPS)
                body = ListGroupsRequest(
                    states_filter=[s for s in STATES if s.lower() in wanted]
                    if wanted and version >= 4
                    else [],
                    types_filter=[],
                )
                return conn.request(
                    ApiKey.LIST_GROUPS,
                    body,
                    version,
                    timeout=deadline.timeout(self.cluster.config.request_timeout),
                )

            try:
                response = self.cluster.retry(call, deadline=deadline, description="ListGroups")
            except KafkaError as error:
                errors.append(error)
                continue
            if response.error_code:
                errors.append(
                    BrokerResponseError(response.error_code, context=f"ListGroups on broker {node_id}")
                )
                continue
            for g in response.groups:
                state = getattr(g, "group_state", None) or None
                listings[g.group_id] = GroupListing(g.group_id, state, g.protocol_type, node_id)
        if errors and not listings:
            raise errors[0]
        result = sorted(listings.values(), key=lambda g: g.group_id)
        if wanted is not None:
            unknown_state = [g for g in result if g.state is None]
            if unknown_state:  # ListGroups before v4 says no state: ask DescribeGroups
                described = {d.group_id: d for d in self.describe_groups([g.group_id for g in unknown_state])}
                result = [
                    dataclasses.replace(g, state=described[g.group_id].state) if g.state is None else g
                    for g in result
                ]
            result = [g for g in result if (g.state or "").lower() in wanted]
        return result

    # ------------------------------------------------------------------------------ describe

    def describe_groups(
        self, group_ids: Iterable[str], *, timeout: float | None = None
    ) -> list[GroupDescription]:
        """Describe groups (DescribeGroups to each coordinator); one result per group, in order."""
        ids = list(dict.fromkeys(group_ids))
        if not ids:
            return []
        deadline = self._deadline(timeout)
        results: dict[str, GroupDescription] = {}
        pending = list(ids)
        backoff = self.cluster.config.retry_backoff_ms / 1000
        while pending:
            coordinators = find_coordinators(self.cluster, pending, deadline=deadline)
            by_node: dict[int, tuple[BrokerInfo, list[str]]] = {}
            for group_id in pending:
                found = coordinators[group_id]
                if isinstance(found, BrokerResponseError):
                    results[group_id] = GroupDescription(group_id, found.code, found.message)
                else:
                    by_node.setdefault(found.node_id, (found, []))[1].append(group_id)
            retry: list[str] = []
            for node_id, (node, group_ids) in by_node.items():
                try:
                    conn = self.cluster.connection(node_id, deadline=deadline)
                    version = conn.version_for(ApiKey.DESCRIBE_GROUPS)
                    response = conn.request(
                        ApiKey.DESCRIBE_GROUPS,
                        DescribeGroupsRequest(groups=group_ids, include_authorized_operations=False),
                        version,
                        timeout=deadline.timeout(self.cluster.config.request_timeout),
                    )
                except KafkaError as error:
                    if not error.retriable:
                        raise
                    retry += group_ids
                    for group_id in group_ids:
                        results[group_id] = GroupDescription(
                            group_id, ErrorCode.NETWORK_EXCEPTION, str(error)
                        )
                    continue
                answered = set()
                for g in response.groups:
                    answered.add(g.group_id)
                    if g.error_code:
                        results[g.group_id] = GroupDescription(g.group_id, g.error_code)
                        if g.error_code in COORDINATOR_ERRORS:
                            retry.append(g.group_id)
                        continue
                    results[g.group_id] = GroupDescription(
                        name=g.group_id,
                        state=g.group_state,
                        protocol_type=g.protocol_type,
                        protocol=g.protocol_data,
                        coordinator=node,
                        members=tuple(decode_member(m, g.protocol_type) for m in g.members),
                    )
                for group_id in group_ids:
                    if group_id not in answered:
                        results[group_id] = GroupDescription(
                            group_id, ErrorCode.UNKNOWN_SERVER_ERROR, "DescribeGroups did not mention it"
                        )
            if not retry or deadline.remaining() <= backoff:
                break
            self.cluster.mark_stale()
            time.sleep(backoff)
            backoff = min(backoff * 2, self.cluster.config.retry_backoff_max_ms / 1000)
            pending = retry
        return [results[g] for g in ids]

    # ------------------------------------------------------------------------------ offsets

    def committed_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (OffsetFetch): of ``partitions``, or all it has (None)."""
        wanted = None if partitions is None else sorted(set(TopicPartition(*tp) for tp in partitions))
        if wanted == []:
            return {}
        deadline = self._deadline(timeout)

        def attempt() -> dict[TopicPartition, OffsetAndMetadata | None]:
            reply = self._request_coordinator(
                group_id,
                ApiKey.OFFSET_FETCH,
                lambda version: offset_fetch_request(version, group_id, wanted, require_stable=False),
                deadline,
                min_version=2 if wanted is None else None,
            )
            fetched = offset_fetch_results(reply.version, reply.body, group_id)
            if fetched.error_code:
                raise BrokerResponseError(fetched.error_code, context=f"group {group_id!r}")
            for tp, code in fetched.errors.items():
                raise BrokerResponseError(code, context=f"group {group_id!r} partition {tp}")
            if wanted is None:
                return {tp: value for tp, value in sorted(fetched.offsets.items()) if value is not None}
            return {tp: fetched.offsets.get(tp) for tp in wanted}

        return self._retry_coordinator(attempt, deadline, "OffsetFetch")

    def offsets_with_lag(
        self, group: str | GroupDescription, *, timeout: float | None = None
    ) -> list[PartitionOffsets]:
        """Per partition the group has committed offsets for or has assigned to a member: the
        committed offset, the log start and end offsets (ListOffsets) and the lag; sorted."""
        description = (
            group
            if isinstance(group, GroupDescription)
            else self.describe_groups([group], timeout=timeout)[0]
        )
        committed = (
            self.committed_offsets(description.group_id, timeout=timeout) if description.exists else {}
        )
        owner = {tp: m for m in description.members for tp in m.assignment}
        partitions = sorted(set(committed) | set(owner))
        if not partitions:
            return []
        start = self.admin.list_offsets(partitions, "earliest", timeout=timeout)
        end = self.admin.list_offsets(partitions, "latest", timeout=timeout)
        out = []
        for tp in partitions:
            value = committed.get(tp)
            s, e = start.get(tp), end.get(tp)
            error = next((r.error for r in (s, e) if r is not None and not r.ok), None)
            out.append(
                PartitionOffsets(
                    topic_partition=tp,
                    committed=value.offset if value is not None else None,
                    log_start=s.offset if s is not None and s.ok else None,
                    log_end=e.offset if e is not None and e.ok else None,
                    member=owner.get(tp),
                    metadata=value.metadata if value is not None else "",
                    error=error,
                )
            )
        return out

    # ------------------------------------------------------------------------------ reset

    def partitions_of(
        self, topics: Iterable[str], *, timeout: float | None = None
    ) -> dict[str, list[TopicPartition] | str]:
        """Every partition of each topic, or the topic's error name."""
        out: dict[str, list[TopicPartition] | str] = {}
        for description in self.admin.describe_topics(list(topics), timeout=timeout):
            if description.ok:
                out[description.name] = [
                    TopicPartition(description.name, p.partition) for p in description.partitions
                ]
            else:
                out[description.name] = description.error or "UNKNOWN_SERVER_ERROR"
        return out

    def alter_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        timeout: float | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit offsets for a group without members (OffsetCommit, generation -1, member "");
        the error code of each partition."""
        values = {
            TopicPartition(*tp): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            for tp, v in offsets.items()
        }
        if not values:
            return {}
        deadline = self._deadline(timeout)

        def attempt() -> dict[TopicPartition, int]:
            response = self._request_coordinator(
                group_id,
                ApiKey.OFFSET_COMMIT,
                lambda version: offset_commit_request(version, group_id, values),
                deadline,
            ).body
            codes = offset_commit_results(response)
            retriable = [c for c in codes.values() if c in COORDINATOR_ERRORS]
            if retriable:
                raise BrokerResponseError(retriable[0], context=f"OffsetCommit of group {group_id!r}")
            return {tp: codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in values}

        return self._retry_coordinator(attempt, deadline, "OffsetCommit")

    # ------------------------------------------------------------------------------ delete

    def delete_groups(self, group_ids: Iterable[str], *, timeout: float | None = None) -> list[Result]:
        """Delete groups and their committed offsets (DeleteGroups to each coordinator). A group
        with members fails with NON_EMPTY_GROUP, an unknown one with GROUP_ID_NOT_FOUND."""
        ids = list(dict.fromkeys(group_ids))
        deadline = self._deadline(timeout)
        results: dict[str, Result] = {}
        for group_id in ids:

            def attempt(group_id: str = group_id) -> Result:
                response = self._request_coordinator(
                    group_id,
                    ApiKey.DELETE_GROUPS,
                    lambda version: DeleteGroupsRequest(groups_names=[group_id]),
                    deadline,
                ).body
                found = next((r for r in response.results if r.group_id == group_id), None)
                if found is None:
                    return Result(group_id, ErrorCode.UNKNOWN_SERVER_ERROR, "DeleteGroups did not mention it")
                if found.error_code in COORDINATOR_ERRORS:
                    raise BrokerResponseError(found.error_code, context=f"group {group_id!r}")
                return Result(group_id, found.error_code)

            try:
                results[group_id] = self._retry_coordinator(attempt, deadline, "DeleteGroups")
            except BrokerResponseError as error:
                results[group_id] = Result(group_id, error.code, error.message)
        return [results[g] for g in ids]

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, timeout: float | None = None
    ) -> OffsetDeleteResult:
        """Delete some of a group's committed offsets (OffsetDelete): the group's error code and
        each partition's (GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to its topic)."""
        wanted = sorted(set(TopicPartition(*tp) for tp in partitions))
        deadline = self._deadline(timeout)
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                OffsetDeleteRequestTopic(
                    name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps]
                )
                for t, ps in by_topic.items()
            ],
        )

        def attempt() -> OffsetDeleteResult:
            response = self._request_coordinator(
                group_id, ApiKey.OFFSET_DELETE, lambda version: body, deadline
            ).body
            if response.error_code in COORDINATOR_ERRORS:
                raise BrokerResponseError(response.error_code, context=f"group {group_id!r}")
            codes = {
                TopicPartition(t.name, p.partition_index): p.error_code
                for t in response.topics
                for p in t.partitions
            }
            return OffsetDeleteResult(
                response.error_code, {tp: codes.get(tp, response.error_code) for tp in wanted}
            )

        return self._retry_coordinator(attempt, deadline, "OffsetDelete")


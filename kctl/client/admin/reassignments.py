"""Replica admin calls: leader elections (ElectLeaders: preferred or unclean) and partition
reassignments (AlterPartitionReassignments to start or cancel them, ListPartitionReassignments to see
the ongoing ones), all sent to the controller; and the replication throttle of a reassignment
(Kafka's dynamic broker configs ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate``, IncrementalAlterConfigs to each broker)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from kctl.client.admin.base import AdminBase
from kctl.client.admin.results import Result, _Outcome
from kctl.client.errors import BrokerResponseError
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.configs import BROKER_RESOURCE, AlterConfigOp
from kctl.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kctl.protocol.messages.configs import (
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from kctl.protocol.messages.elect_leaders import PREFERRED, UNCLEAN, ElectLeadersRequest, TopicPartitions
from kctl.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)

ELECTION_TYPES = {"preferred": PREFERRED, "unclean": UNCLEAN}
THROTTLE_RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS_CONFIGS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


def throttled_replicas(
    moves: Iterable[tuple[TopicPartition, Sequence[int], Sequence[int]]],
) -> dict[str, dict[str, str]]:
    """The topic configs Kafka's reassignment tool sets for a throttled reassignment, per topic:
    ``leader.replication.throttled.replicas`` = every current replica of each moving partition
    (``partition:broker``; they serve the copies) and ``follower.replication.throttled.replicas`` =
    the replicas being added (they fetch them). ``moves`` are (partition, current, target)."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for tp, current, target in moves:
        if tuple(current) == tuple(target):
            continue
        topic, partition = tp[0], tp[1]
        leaders.setdefault(topic, []).extend(f"{partition}:{b}" for b in current)
        followers.setdefault(topic, []).extend(f"{partition}:{b}" for b in target if b not in current)
    return {
        topic: {
            THROTTLED_REPLICAS_CONFIGS[0]: ",".join(dict.fromkeys(leaders[topic])),
            THROTTLED_REPLICAS_CONFIGS[1]: ",".join(dict.fromkeys(followers.get(topic, []))),
        }
        for topic in leaders
    }


@dataclasses.dataclass(frozen=True)
class PartitionResult(_Outcome):
    """The outcome of an operation for one partition: ok, or Kafka's error name and message."""

    topic_partition: TopicPartition
    error_code: int = 0
    error_message: str | None = None


@dataclasses.dataclass(frozen=True)
class PartitionReassignment:
    """An ongoing reassignment: the partition's replicas now (old and new while it runs), those being
    added and those being removed."""

    topic_partition: TopicPartition
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in dict.fromkeys(partitions):
        by_topic.setdefault(tp[0], []).append(tp[1])
    return by_topic


class ReassignmentAdmin(AdminBase):
    """Leader elections and partition reassignments (see the module docstring)."""

    def elect_leaders(
        self,
        election_type: str = "preferred",
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> list[PartitionResult]:
        """Elect leaders (ElectLeaders, to the controller): ``"preferred"`` (the first replica of the
        assignment, if alive and in the ISR) or ``"unclean"`` (any live replica, for partitions without
        a leader). ``partitions`` None: every partition. One result per partition: ok, or
        ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
        UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, ... The controller answers once the leaders are
        elected or the timeout has passed."""
        if election_type not in ELECTION_TYPES:
            raise ValueError(f"election type {election_type!r}: one of {', '.join(ELECTION_TYPES)}")
        deadline = self._deadline(timeout)
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        if wanted is not None and not wanted:
            return []
        topic_partitions = (
            None
            if wanted is None
            else [TopicPartitions(topic=t, partitions=ps) for t, ps in _by_topic(wanted).items()]
        )

        def call() -> list[PartitionResult]:
            controller = self.cluster.controller_id(deadline=deadline)
            conn = self.cluster.connection(controller, deadline=deadline)
            version = conn.version_for(ApiKey.ELECT_LEADERS)
            if version == 0 and election_type != "preferred":
                raise BrokerResponseError(
                    ErrorCode.UNSUPPORTED_VERSION,
                    "the controller only does preferred elections (ElectLeaders v0)",
                )
            body = ElectLeadersRequest(
                election_type=ELECTION_TYPES[election_type],
                topic_partitions=topic_partitions,
                timeout_ms=self._request_timeout_ms(deadline),
            )
            response = conn.request(
                ApiKey.ELECT_LEADERS, body, version, timeout=deadline.timeout(self.config.request_timeout) + 1
            )
            if response.error_code:
                raise BrokerResponseError(response.error_code, None, context="ElectLeaders")
            results = [
                PartitionResult(TopicPartition(r.topic, p.partition_id), p.error_code, p.error_message)
                for r in response.replica_election_results
                for p in r.partition_result
            ]
            if any(r.error_code == ErrorCode.NOT_CONTROLLER for r in results):  # v0 has no top-level code
                self.cluster.mark_stale()
                raise BrokerResponseError(ErrorCode.NOT_CONTROLLER, None, context="ElectLeaders")
            return results

        results = self.cluster.retry(call, deadline=deadline, description="ElectLeaders")
        if wanted is None:
            return sorted(results, key=lambda r: r.topic_partition)
        found = {r.topic_partition: r for r in results}
        return [
            found.get(tp)
            or PartitionResult(
                tp, ErrorCode.UNKNOWN_SERVER_ERROR, "the controller's answer did not mention it"
            )
            for tp in wanted
        ]

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout: float | None = None,
    ) -> list[PartitionResult]:
        """Start reassignments (target replicas per partition) or cancel them (None), with
        AlterPartitionReassignments to the controller; one result per partition, in order. The
        answer does not wait for the data to move: `list_partition_reassignments` shows progress."""
        items = dict(reassignments)
        if not items:
            return []
        deadline = self._deadline(timeout)
        topics: dict[str, list[ReassignablePartition]] = {}
        for tp, replicas in items.items():
            topics.setdefault(tp[0], []).append(
                ReassignablePartition(
                    partition_index=tp[1], replicas=None if replicas is None else [int(r) for r in replicas]
                )
            )
        body_topics = [ReassignableTopic(name=t, partitions=ps) for t, ps in topics.items()]

        def call() -> list[PartitionResult]:
            body = AlterPartitionReassignmentsRequest(
                timeout_ms=self._request_timeout_ms(deadline), topics=body_topics
            )
            response = self.cluster.request_controller(
                ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, deadline=deadline
            )
            if response.error_code:
                if response.error_code == ErrorCode.NOT_CONTROLLER:
                    self.cluster.mark_stale()
                raise BrokerResponseError(
                    response.error_code, response.error_message, context="AlterPartitionReassignments"
                )
            return [
                PartitionResult(TopicPartition(t.name, p.partition_index), p.error_code, p.error_message)
                for t in response.responses
                for p in t.partitions
            ]

        found = {
            r.topic_partition: r
            for r in self.cluster.retry(call, deadline=deadline, description="AlterPartitionReassignments")
        }
        return [
            found.get(TopicPartition(*tp))
            or PartitionResult(
                TopicPartition(*tp),
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "the controller's answer did not mention it",
            )
            for tp in items
        ]

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The ongoing reassignments (ListPartitionReassignments, to the controller), of ``partitions``
        or of every partition (None)."""
        deadline = self._deadline(timeout)
        wanted = None if partitions is None else list(partitions)
        topics = (
            None
            if wanted is None
            else [
                ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                for t, ps in _by_topic(wanted).items()
            ]
        )

        def call() -> dict[TopicPartition, PartitionReassignment]:
            body = ListPartitionReassignmentsRequest(
                timeout_ms=self._request_timeout_ms(deadline), topics=topics
            )
            response = self.cluster.request_controller(
                ApiKey.LIST_PARTITION_REASSIGNMENTS, body, deadline=deadline
            )
            if response.error_code:
                if response.error_code == ErrorCode.NOT_CONTROLLER:
                    self.cluster.mark_stale()
                raise BrokerResponseError(
                    response.error_code, response.error_message, context="ListPartitionReassignments"
                )
            return {
                TopicPartition(t.name, p.partition_index): PartitionReassignment(
                    TopicPartition(t.name, p.partition_index),
                    tuple(p.replicas),
                    tuple(p.adding_replicas),
                    tuple(p.removing_replicas),
                )
                for t in response.topics
                for p in t.partitions
            }

        if wanted is not None and not wanted:
            return {}
        return self.cluster.retry(call, deadline=deadline, description="ListPartitionReassignments")

    def set_replication_throttle(
        self, broker_ids: Iterable[int], rate: int | None, *, timeout: float | None = None
    ) -> list[Result]:
        """Set (``rate`` bytes/s) or remove (None) ``leader.replication.throttled.rate`` and
        ``follower.replication.throttled.rate`` on each broker (IncrementalAlterConfigs to that
        broker, as Kafka's reassignment tool does); one result per broker (``name`` is its id). A
        broker that does not take these dynamic configs answers with an error (INVALID_REQUEST,
        INVALID_CONFIG, ...): the caller decides what that means."""
        deadline = self._deadline(timeout)
        ops: list[tuple[str, AlterConfigOp, str | None]]
        if rate is None:
            ops = [(name, AlterConfigOp.DELETE, None) for name in THROTTLE_RATE_CONFIGS]
        else:
            ops = [(name, AlterConfigOp.SET, str(int(rate))) for name in THROTTLE_RATE_CONFIGS]
        results = []
        for broker_id in sorted(set(broker_ids)):

            def call(broker_id: int = broker_id) -> Result:
                conn = self.cluster.connection(broker_id, deadline=deadline)
                body = IncrementalAlterConfigsRequest(
                    resources=[
                        IncrementalAlterConfigsResource(
                            resource_type=BROKER_RESOURCE,
                            resource_name=str(broker_id),
                            configs=[
                                IncrementalAlterableConfig(name=k, config_operation=int(op), value=v)
                                for k, op, v in ops
                            ],
                        )
                    ],
                    validate_only=False,
                )
                response = conn.request(
                    ApiKey.INCREMENTAL_ALTER_CONFIGS,
                    body,
                    timeout=deadline.timeout(self.config.request_timeout),
                )
                r = response.responses[0] if response.responses else None
                if r is None:
                    return Result(str(broker_id), ErrorCode.UNKNOWN_SERVER_ERROR, "empty answer")
                return Result(str(broker_id), r.error_code, r.error_message)

            results.append(self.cluster.retry(call, deadline=deadline, description="IncrementalAlterConfigs"))
        return results

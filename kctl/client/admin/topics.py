"""Topic admin calls: create and delete topics (to the controller), list and describe them
(Metadata), grow their partitions (CreatePartitions)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kctl.client.admin.base import AdminBase, Outcome
from kctl.client.admin.results import CreateTopicResult, NewTopic, Result, TopicDescription
from kctl.client.cluster import Deadline
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kctl.protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kctl.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState


class TopicAdmin(AdminBase):
    """Topics and partitions (see the module docstring)."""

    def create_topics(
        self, new_topics: Iterable[NewTopic], validate_only: bool = False, *, timeout: float | None = None
    ) -> list[CreateTopicResult]:
        """Create topics (CreateTopics, sent to the controller); one result per topic, in order.
        A name given twice is not sent: both get INVALID_REQUEST."""
        given = list(new_topics)
        counts: dict[str, int] = {}
        for t in given:
            counts[t.name] = counts.get(t.name, 0) + 1
        topics = {t.name: t for t in given if counts[t.name] == 1}
        deadline = self._deadline(timeout)

        def attempt(names: list[str], deadline: Deadline) -> dict[str, Outcome]:
            body = CreateTopicsRequest(
                topics=[_creatable(topics[n]) for n in names],
                timeout_ms=self._request_timeout_ms(deadline),
                validate_only=validate_only,
            )
            response = self.cluster.request_controller(ApiKey.CREATE_TOPICS, body, deadline=deadline)
            return {t.name: Outcome(t.error_code, t.error_message, t) for t in response.topics}

        outcomes = self._run(list(topics), attempt, deadline) if topics else {}
        results = []
        for name in (t.name for t in given):
            if counts[name] > 1:
                results.append(
                    CreateTopicResult(
                        name, ErrorCode.INVALID_REQUEST, f"topic {name!r} is named more than once"
                    )
                )
                continue
            outcome = outcomes[name]
            t = outcome.payload
            if outcome.error_code or t is None:
                results.append(CreateTopicResult(name, outcome.error_code, outcome.error_message))
                continue
            topic_id = t.topic_id if t.topic_id is not None and t.topic_id.int else None
            configs = {c.name: c.value for c in (t.configs or [])}
            results.append(
                CreateTopicResult(name, 0, None, topic_id, t.num_partitions, t.replication_factor, configs)
            )
        if not validate_only and any(r.ok for r in results):
            self.cluster.mark_stale()
        return results

    def delete_topics(self, names: Iterable[str], *, timeout: float | None = None) -> list[Result]:
        """Delete topics (DeleteTopics, sent to the controller); one result per topic, in order."""
        names = list(dict.fromkeys(names))
        deadline = self._deadline(timeout)

        def attempt(pending: list[str], deadline: Deadline) -> dict[str, Outcome]:
            body = DeleteTopicsRequest(
                topics=[DeleteTopicState(name=n) for n in pending],
                topic_names=list(pending),
                timeout_ms=self._request_timeout_ms(deadline),
            )
            response = self.cluster.request_controller(ApiKey.DELETE_TOPICS, body, deadline=deadline)
            # asked by name, answered by name (the name is null only in answers to deletions by id)
            return {
                r.name or "": Outcome(r.error_code, r.error_message) for r in response.responses
            }

        outcomes = self._run(names, attempt, deadline)
        self.cluster.mark_stale()
        return [Result(n, outcomes[n].error_code, outcomes[n].error_message) for n in names]

    def list_topics(
        self, include_internal: bool = False, *, timeout: float | None = None
    ) -> list[TopicDescription]:
        """Every topic (sorted by name), described: Metadata carries partitions and replicas anyway."""
        deadline = self._deadline(timeout)
        metadata = self.cluster.retry(
            lambda: self.cluster.refresh_metadata(None, deadline=deadline), deadline=deadline
        )
        return [
            TopicDescription.from_metadata(t)
            for name, t in sorted(metadata.topics.items())
            if include_internal or not t.is_internal
        ]

    def describe_topics(
        self, names: Iterable[str], *, timeout: float | None = None
    ) -> list[TopicDescription]:
        """Describe topics (Metadata); one result per name, in order — UNKNOWN_TOPIC_OR_PARTITION
        for a topic that does not exist. A partition without a leader shows leader -1."""
        names = list(dict.fromkeys(names))
        if not names:
            return []
        deadline = self._deadline(timeout)

        def attempt(pending: list[str], deadline: Deadline) -> dict[str, Outcome]:
            metadata = self.cluster.refresh_metadata(pending, deadline=deadline)
            outcomes: dict[str, Outcome] = {}
            for name in pending:
                topic = metadata.topic(name)
                if topic is None:
                    outcomes[name] = Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif topic.error_code:
                    outcomes[name] = Outcome(topic.error_code, None, topic)
                else:
                    outcomes[name] = Outcome(0, None, topic)
            return outcomes

        outcomes = self._run(names, attempt, deadline)
        results = []
        for name in names:
            outcome = outcomes[name]
            topic = outcome.payload
            if outcome.error_code or topic is None:
                results.append(TopicDescription(name, outcome.error_code, outcome.error_message))
            else:
                results.append(TopicDescription.from_metadata(topic))
        return results

    def create_partitions(
        self,
        topic: str,
        total_count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> Result:
        """Grow ``topic`` to ``total_count`` partitions (CreatePartitions, sent to the controller).
        ``assignments``: the replicas of each new partition."""
        deadline = self._deadline(timeout)

        def attempt(pending: list[str], deadline: Deadline) -> dict[str, Outcome]:
            body = CreatePartitionsRequest(
                topics=[
                    CreatePartitionsTopic(
                        name=topic,
                        count=total_count,
                        assignments=None
                        if assignments is None
                        else [CreatePartitionsAssignment(broker_ids=list(a)) for a in assignments],
                    )
                ],
                timeout_ms=self._request_timeout_ms(deadline),
                validate_only=validate_only,
            )
            response = self.cluster.request_controller(ApiKey.CREATE_PARTITIONS, body, deadline=deadline)
            return {r.name: Outcome(r.error_code, r.error_message) for r in response.results}

        outcome = self._run([topic], attempt, deadline)[topic]
        if not outcome.error_code and not validate_only:
            self.cluster.mark_stale()
        return Result(topic, outcome.error_code, outcome.error_message)



def _creatable(topic: NewTopic) -> CreatableTopic:
    assignments = [
        CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
        for p, ids in sorted((topic.assignment or {}).items())
    ]
    return CreatableTopic(
        name=topic.name,
        num_partitions=-1 if assignments else topic.num_partitions,
        replication_factor=-1 if assignments else topic.replication_factor,
        assignments=assignments,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in topic.configs.items()],
    )

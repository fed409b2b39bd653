"""The admin client: topics, partitions, configs, offsets, records and the cluster, over Kafka's admin APIs.

::

    with AdminClient("127.0.0.1:9092") as admin:
        results = admin.create_topics([NewTopic("orders", 6, 1, {"retention.ms": "86400000"})])
        raise_for_errors(results)                       # or look at each result's .error
        [orders] = admin.describe_topics(["orders"])
        offsets = admin.list_offsets([TopicPartition("orders", 0)], "latest")

Where an operation names several topics or partitions, each gets its own result carrying Kafka's
error name and the broker's message (``error``, ``error_code``, ``error_message``), so a caller can
report partial failures; ``raise_for_errors`` turns the first failure into an exception.

Routing follows Kafka's admin client: CreateTopics, DeleteTopics and CreatePartitions go to the
controller; ListOffsets and DeleteRecords to each partition's leader (one pipelined request per
leader); the rest to any broker. Retriable failures (NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, lost connections, ...) are retried for the items they concern, with backoff,
until the operation's deadline (``timeout`` seconds, default ``default.api.timeout.ms``).
"""

from __future__ import annotations

import dataclasses
import random
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from kctl.client.cluster import RETRIABLE_CODES, ClusterClient, Deadline, is_retriable
from kctl.client.config import ClientConfig
from kctl.client.errors import (
    BrokerResponseError,
    IncompatibleBrokerError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kctl.client.types import BrokerInfo, TopicMetadata, TopicPartition
from kctl.protocol import ApiKey, ErrorCode, error_name
from kctl.protocol.configs import BROKER_RESOURCE, TOPIC_RESOURCE, AlterConfigOp, ConfigSource
from kctl.protocol.messages.configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
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
from kctl.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kctl.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from kctl.protocol.messages.describe_cluster import DescribeClusterRequest
from kctl.protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
OFFSET_SPECS: dict[str, int] = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}
"""The named ``list_offsets`` specs and the timestamps Kafka's ListOffsets uses for them."""

OffsetSpec = str | int
"""``"earliest"``, ``"latest"``, ``"max-timestamp"`` or a timestamp in ms (first offset at or after it)."""


# ----------------------------------------------------------------------------------------- results


class _Outcome:
    """``ok`` and Kafka's ``error`` name for a result that carries an ``error_code`` (0: success)."""

    error_code: int

    @property
    def ok(self) -> bool:
        return self.error_code == 0

    @property
    def error(self) -> str | None:
        """Kafka's name of the error (``TOPIC_ALREADY_EXISTS``), None when it succeeded."""
        return error_name(self.error_code) if self.error_code else None


@dataclasses.dataclass(frozen=True)
class Result(_Outcome):
    """The outcome of an operation for one named thing: ok, or a Kafka error name and message."""

    name: str
    error_code: int = 0
    error_message: str | None = None

    def exception(self) -> BrokerResponseError | None:
        """The error as an exception, None when it succeeded."""
        if not self.error_code:
            return None
        return BrokerResponseError(self.error_code, self.error_message, context=self.name)

    def raise_for_error(self) -> None:
        error = self.exception()
        if error is not None:
            raise error


@dataclasses.dataclass(frozen=True)
class NewTopic:
    """A topic to create. -1 partitions / replication factor: the broker's defaults
    (``num.partitions``, ``default.replication.factor``). ``assignment``: partition -> broker ids
    (then partitions and replication factor must be -1)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    assignment: Mapping[int, Sequence[int]] | None = None


@dataclasses.dataclass(frozen=True)
class CreateTopicResult(Result):
    """A created topic (or, with ``validate_only``, what would be created); -1/None when the broker
    did not say (CreateTopics before v5/v7)."""

    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str | None] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class PartitionInfo(_Outcome):
    """One partition: leader (-1: none), leader epoch, replicas, in-sync replicas, offline replicas."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()
    error_code: int = 0


@dataclasses.dataclass(frozen=True)
class TopicDescription(Result):
    """A topic: id, internal flag and partitions (sorted). On error only ``name`` and the error."""

    topic_id: uuid.UUID | None = None
    internal: bool = False
    partitions: tuple[PartitionInfo, ...] = ()

    @property
    def replication_factor(self) -> int:
        """The replica count of the first partition (what Kafka's tools print), 0 without partitions."""
        return len(self.partitions[0].replicas) if self.partitions else 0

    @classmethod
    def from_metadata(cls, topic: TopicMetadata) -> TopicDescription:
        return cls(
            name=topic.name,
            error_code=topic.error_code,
            topic_id=topic.topic_id,
            internal=topic.is_internal,
            partitions=tuple(
                PartitionInfo(
                    p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, p.offline_replicas, p.error_code
                )
                for p in topic.partitions
            ),
        )


@dataclasses.dataclass(frozen=True)
class ConfigSynonym:
    """Where else a config's value could come from, highest precedence first."""

    name: str
    value: str | None
    source: ConfigSource


@dataclasses.dataclass(frozen=True)
class ConfigEntry:
    """One config of a topic or broker."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    read_only: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    is_sensitive: bool = False


@dataclasses.dataclass(frozen=True)
class TopicConfigs(Result):
    """The configs of one topic (empty on error)."""

    entries: tuple[ConfigEntry, ...] = ()

    def non_default(self) -> list[ConfigEntry]:
        """The entries whose value does not come from the built-in default."""
        return [e for e in self.entries if e.source is not ConfigSource.DEFAULT_CONFIG and not e.is_default]


@dataclasses.dataclass(frozen=True)
class OffsetResult(_Outcome):
    """ListOffsets for one partition: ``offset`` (-1 when none), the record's ``timestamp`` (-1 when
    not applicable), the leader epoch; or an error."""

    topic_partition: TopicPartition
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error_code: int = 0
    error_message: str | None = None



@dataclasses.dataclass(frozen=True)
class DeleteRecordsResult(_Outcome):
    """DeleteRecords for one partition: the new log start offset (``low_watermark``) or an error."""

    topic_partition: TopicPartition
    low_watermark: int = -1
    error_code: int = 0
    error_message: str | None = None



@dataclasses.dataclass(frozen=True)
class ClusterDescription:
    """The cluster id, the controller and the brokers (sorted by id)."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


@dataclasses.dataclass(frozen=True)
class ReplicaLogInfo:
    """One partition replica in a log directory: its size on disk, how far its log end offset is
    behind the high watermark, and whether it is a future replica being moved between directories."""

    topic_partition: TopicPartition
    size: int
    offset_lag: int = 0
    is_future: bool = False


@dataclasses.dataclass(frozen=True)
class LogDirDescription(_Outcome):
    """One log directory of a broker: its path, the replicas in it (sorted) and the volume's total
    and usable bytes (-1 when the broker does not say: DescribeLogDirs before v4); or an error
    (``KAFKA_STORAGE_ERROR`` for a directory that is offline)."""

    broker_id: int
    path: str
    replicas: tuple[ReplicaLogInfo, ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1
    error_code: int = 0


    @property
    def size(self) -> int:
        """The bytes of every replica in the directory."""
        return sum(r.size for r in self.replicas)


class AdminOperationError(BrokerResponseError):
    """Raised by ``raise_for_errors``: the first failure, with every failed result in ``failures``."""

    def __init__(self, failures: Sequence[Any]) -> None:
        first = failures[0]
        label = getattr(first, "name", None) or str(getattr(first, "topic_partition", ""))
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        super().__init__(first.error_code, first.error_message, context=f"{label}{more}")
        self.failures = list(failures)

    def __reduce__(self) -> tuple[type, tuple[list[Any]]]:  # type: ignore[override]
        return (type(self), (self.failures,))


def raise_for_errors(results: Iterable[Any], *, ignore: Collection[int | str] = ()) -> None:
    """Raise ``AdminOperationError`` if any result failed (error codes or names in ``ignore`` do
    not count, e.g. ``ignore={"TOPIC_ALREADY_EXISTS"}``)."""
    failures = [
        r
        for r in (results.values() if isinstance(results, Mapping) else results)
        if r.error_code and r.error_code not in ignore and error_name(r.error_code) not in ignore
    ]
    if failures:
        raise AdminOperationError(failures)


# ----------------------------------------------------------------------------------------- helpers

Outcome = tuple[int, str | None, Any]
"""(error code, error message, payload) for one item of an operation."""


def _error_code_of(error: KafkaError) -> int:
    if isinstance(error, BrokerResponseError):
        return error.code
    if isinstance(error, KafkaTimeoutError):
        return ErrorCode.REQUEST_TIMED_OUT
    if isinstance(error, KafkaConnectionError):
        return ErrorCode.NETWORK_EXCEPTION
    if isinstance(error, IncompatibleBrokerError):
        return ErrorCode.UNSUPPORTED_VERSION
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _offset_timestamp(spec: OffsetSpec) -> int:
    if isinstance(spec, bool):
        raise ValueError(f"bad offset spec {spec!r}")
    if isinstance(spec, int):
        if spec < 0 and spec not in (EARLIEST, LATEST, MAX_TIMESTAMP):
            raise ValueError(f"bad offset spec {spec}: a timestamp in ms, or earliest/latest/max-timestamp")
        return spec
    text = str(spec).strip().lower()
    if text in OFFSET_SPECS:
        return OFFSET_SPECS[text]
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"bad offset spec {spec!r}: expected earliest, latest, max-timestamp or a timestamp in ms"
        ) from None
    return _offset_timestamp(value)


class AdminClient:
    """Kafka's admin operations. ``bootstrap_servers`` may also be an existing ``ClusterClient``
    (shared, then not closed by ``close``). ``config``/``overrides`` as for ``ClusterClient``."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | ClusterClient,
        config: ClientConfig | Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        if isinstance(bootstrap_servers, ClusterClient):
            self.cluster = bootstrap_servers
            self._owns_cluster = False
        else:
            self.cluster = ClusterClient(bootstrap_servers, config, **overrides)
            self._owns_cluster = True

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_cluster:
            self.cluster.close()

    @property
    def config(self) -> ClientConfig:
        return self.cluster.config

    def _deadline(self, timeout: float | None) -> Deadline:
        return self.cluster.deadline(timeout)

    def _request_timeout_ms(self, deadline: Deadline) -> int:
        """The server-side timeout to put in a request: what is left, within ``request.timeout.ms``."""
        return max(int(deadline.timeout(self.config.request_timeout) * 1000), 1)

    # ------------------------------------------------------------------------------ retry engine

    def _run(
        self,
        keys: Sequence[Any],
        attempt: Callable[[list[Any], Deadline], dict[Any, Outcome]],
        deadline: Deadline,
        retry_codes: Collection[int] = (),
    ) -> dict[Any, Outcome]:
        """Run ``attempt`` on the pending keys until each has a final outcome (success, or an error
        not retriable), retrying the rest with backoff until the deadline. An exception from
        ``attempt`` concerns every pending key: retried if retriable, re-raised at the deadline."""
        final: dict[Any, Outcome] = {}
        pending = list(dict.fromkeys(keys))
        backoff = self.config.retry_backoff_ms / 1000.0
        while pending:
            raised: KafkaError | None = None
            try:
                outcomes = attempt(pending, deadline)
            except KafkaError as error:
                if not is_retriable(error, retry_codes):
                    raise
                raised = error
                outcomes = {k: (_error_code_of(error), str(error), None) for k in pending}
            retry: list[Any] = []
            for key in pending:
                code, message, payload = outcomes.get(
                    key, (ErrorCode.UNKNOWN_SERVER_ERROR, "the broker's response did not mention it", None)
                )
                if code and (code in RETRIABLE_CODES or code in retry_codes):
                    retry.append(key)
                final[key] = (code, message, payload)
            if not retry:
                break
            wait = backoff * random.uniform(0.8, 1.2)
            if deadline.remaining() <= wait:
                if raised is not None and len(retry) == len(pending):
                    raise raised
                break
            self.cluster.mark_stale()
            time.sleep(wait)
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000.0)
            pending = retry
        return final

    def _per_leader(
        self,
        items: Mapping[TopicPartition, Any],
        api_key: int,
        build: Callable[[dict[TopicPartition, Any], int, Deadline], Any],
        parse: Callable[[Any], dict[TopicPartition, Outcome]],
        deadline: Deadline,
        *,
        min_version: int | None = None,
        retry_codes: Collection[int] = (),
    ) -> dict[TopicPartition, Outcome]:
        """Send one request per partition leader (pipelined: all sent, then all received)."""

        def attempt(pending: list[TopicPartition], deadline: Deadline) -> dict[TopicPartition, Outcome]:
            outcomes: dict[TopicPartition, Outcome] = {}
            groups: dict[int, dict[TopicPartition, Any]] = {}
            for tp in pending:
                try:
                    leader = self.cluster.leader_for(tp, deadline=deadline)
                except BrokerResponseError as error:
                    outcomes[tp] = (error.code, error.message, None)
                    continue
                groups.setdefault(leader, {})[tp] = items[tp]
            sent = []
            for leader, group in groups.items():
                try:
                    conn = self.cluster.connection(leader, deadline=deadline)
                    version = conn.version_for(api_key, min_version=min_version)
                    sent.append((conn, conn.send(api_key, build(group, version, deadline), version), group))
                except KafkaError as error:
                    if not error.retriable and not isinstance(error, IncompatibleBrokerError):
                        raise
                    outcomes.update({tp: (_error_code_of(error), str(error), None) for tp in group})
            for conn, in_flight, group in sent:
                try:
                    response = conn.receive(in_flight, timeout=deadline.timeout(self.config.request_timeout))
                except KafkaError as error:
                    if not error.retriable:
                        raise
                    outcomes.update({tp: (_error_code_of(error), str(error), None) for tp in group})
                    continue
                parsed = parse(response)
                for tp in group:
                    outcomes[tp] = parsed.get(
                        tp, (ErrorCode.UNKNOWN_SERVER_ERROR, "the leader's response did not mention it", None)
                    )
            return outcomes

        return self._run(list(items), attempt, deadline, retry_codes)

    # ------------------------------------------------------------------------------ topics

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
            return {t.name: (t.error_code, t.error_message, t) for t in response.topics}

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
            code, message, t = outcomes[name]
            if code or t is None:
                results.append(CreateTopicResult(name, code, message))
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
            return {
                r.name: (r.error_code, getattr(r, "error_message", None), None) for r in response.responses
            }

        outcomes = self._run(names, attempt, deadline)
        self.cluster.mark_stale()
        return [Result(n, outcomes[n][0], outcomes[n][1]) for n in names]

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
                    outcomes[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None)
                elif topic.error_code:
                    outcomes[name] = (topic.error_code, None, topic)
                else:
                    outcomes[name] = (0, None, topic)
            return outcomes

        outcomes = self._run(names, attempt, deadline)
        results = []
        for name in names:
            code, message, topic = outcomes[name]
            if code or topic is None:
                results.append(TopicDescription(name, code, message))
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
            return {r.name: (r.error_code, r.error_message, None) for r in response.results}

        code, message, _ = self._run([topic], attempt, deadline)[topic]
        if not code and not validate_only:
            self.cluster.mark_stale()
        return Result(topic, code, message)

    # ------------------------------------------------------------------------------ configs

    def describe_topic_configs(
        self, names: Iterable[str], *, keys: Iterable[str] | None = None, timeout: float | None = None
    ) -> list[TopicConfigs]:
        """The configs of several topics (one DescribeConfigs request); one result per topic, in order."""
        names = list(dict.fromkeys(names))
        if not names:
            return []
        deadline = self._deadline(timeout)
        key_list = None if keys is None else list(keys)

        def attempt(pending: list[str], deadline: Deadline) -> dict[str, Outcome]:
            body = DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(
                        resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=key_list
                    )
                    for n in pending
                ],
                include_synonyms=True,
            )
            response = self.cluster.request(None, ApiKey.DESCRIBE_CONFIGS, body, deadline=deadline)
            return {
                r.resource_name: (r.error_code, r.error_message, r)
                for r in response.results
                if r.resource_type == TOPIC_RESOURCE
            }

        outcomes = self._run(names, attempt, deadline)
        results = []
        for name in names:
            code, message, r = outcomes[name]
            if code or r is None:
                results.append(TopicConfigs(name, code, message))
            else:
                entries = tuple(_config_entry(c, TOPIC_RESOURCE) for c in r.configs)
                results.append(TopicConfigs(name, 0, None, tuple(sorted(entries, key=lambda e: e.name))))
        return results

    def describe_configs(
        self, topic: str, *, keys: Iterable[str] | None = None, timeout: float | None = None
    ) -> list[ConfigEntry]:
        """The configs of one topic (sorted by name); raises ``BrokerResponseError`` on error
        (UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist)."""
        [result] = self.describe_topic_configs([topic], keys=keys, timeout=timeout)
        result.raise_for_error()
        return list(result.entries)

    def describe_broker_configs(self, broker_id: int, *, timeout: float | None = None) -> list[ConfigEntry]:
        """A broker's configs (sorted by name), asked of that broker."""
        deadline = self._deadline(timeout)
        body = DescribeConfigsRequest(
            resources=[DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name=str(broker_id))],
            include_synonyms=True,
        )

        def call() -> Any:
            return self.cluster.request(broker_id, ApiKey.DESCRIBE_CONFIGS, body, deadline=deadline)

        [r] = self.cluster.retry(call, deadline=deadline).results
        if r.error_code:
            raise BrokerResponseError(r.error_code, r.error_message, context=f"broker {broker_id}")
        return sorted((_config_entry(c, BROKER_RESOURCE) for c in r.configs), key=lambda e: e.name)

    def alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,  # Kafka's name for the operation
        delete: Iterable[str] = (),
        *,
        append: Mapping[str, str] | None = None,
        subtract: Mapping[str, str] | None = None,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> Result:
        """Set and delete (revert to default) topic configs with IncrementalAlterConfigs; other
        configs keep their values. ``append``/``subtract`` change list configs (cleanup.policy).
        Against a broker without IncrementalAlterConfigs, the current overrides are read and
        written back changed with AlterConfigs (not atomic)."""
        ops: list[tuple[str, AlterConfigOp, str | None]] = []
        ops += [(k, AlterConfigOp.SET, v) for k, v in (set or {}).items()]
        ops += [(k, AlterConfigOp.DELETE, None) for k in delete]
        ops += [(k, AlterConfigOp.APPEND, v) for k, v in (append or {}).items()]
        ops += [(k, AlterConfigOp.SUBTRACT, v) for k, v in (subtract or {}).items()]
        deadline = self._deadline(timeout)

        def attempt(pending: list[str], deadline: Deadline) -> dict[str, Outcome]:
            conn = self.cluster.any_connection(deadline=deadline)
            if conn.supports(ApiKey.INCREMENTAL_ALTER_CONFIGS):
                body: Any = IncrementalAlterConfigsRequest(
                    resources=[
                        IncrementalAlterConfigsResource(
                            resource_type=TOPIC_RESOURCE,
                            resource_name=topic,
                            configs=[
                                IncrementalAlterableConfig(name=k, config_operation=int(op), value=v)
                                for k, op, v in ops
                            ],
                        )
                    ],
                    validate_only=validate_only,
                )
                response = conn.request(
                    ApiKey.INCREMENTAL_ALTER_CONFIGS,
                    body,
                    timeout=deadline.timeout(self.config.request_timeout),
                )
            else:
                body = AlterConfigsRequest(
                    resources=[
                        AlterConfigsResource(
                            resource_type=TOPIC_RESOURCE,
                            resource_name=topic,
                            configs=[
                                AlterableConfig(name=k, value=v)
                                for k, v in self._altered_overrides(topic, ops, deadline).items()
                            ],
                        )
                    ],
                    validate_only=validate_only,
                )
                response = conn.request(
                    ApiKey.ALTER_CONFIGS, body, timeout=deadline.timeout(self.config.request_timeout)
                )
            return {r.resource_name: (r.error_code, r.error_message, None) for r in response.responses}

        code, message, _ = self._run([topic], attempt, deadline)[topic]
        return Result(topic, code, message)

    def _altered_overrides(
        self, topic: str, ops: list[tuple[str, AlterConfigOp, str | None]], deadline: Deadline
    ) -> dict[str, str]:
        current = self.describe_configs(topic, timeout=deadline.remaining())
        overrides = {e.name: e.value or "" for e in current if e.source is ConfigSource.DYNAMIC_TOPIC_CONFIG}
        effective = {e.name: e.value or "" for e in current}
        for name, op, value in ops:
            if op is AlterConfigOp.SET:
                overrides[name] = value or ""
            elif op is AlterConfigOp.DELETE:
                overrides.pop(name, None)
            else:
                items = [v for v in overrides.get(name, effective.get(name, "")).split(",") if v]
                change = [v.strip() for v in (value or "").split(",") if v.strip()]
                if op is AlterConfigOp.APPEND:
                    items += [v for v in change if v not in items]
                else:
                    items = [v for v in items if v not in change]
                overrides[name] = ",".join(items)
        return overrides

    # ------------------------------------------------------------------------------ offsets, records

    def list_offsets(
        self,
        topic_partitions: Iterable[TopicPartition] | Mapping[TopicPartition, OffsetSpec],
        spec: OffsetSpec = "latest",
        *,
        isolation_level: int = 0,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetResult]:
        """Offsets of partitions (ListOffsets, to each leader): ``spec`` is ``"earliest"`` (the log
        start offset), ``"latest"`` (the high watermark), ``"max-timestamp"`` (the record with the
        largest timestamp) or a timestamp in ms (the first offset at or after it; -1 if none).
        A mapping gives each partition its own spec. ``isolation_level`` 1 is READ_COMMITTED."""
        if isinstance(topic_partitions, Mapping):
            specs = {TopicPartition(*tp): _offset_timestamp(s) for tp, s in topic_partitions.items()}
        else:
            timestamp = _offset_timestamp(spec)
            specs = {TopicPartition(*tp): timestamp for tp in topic_partitions}
        if not specs:
            return {}
        deadline = self._deadline(timeout)
        min_version = 7 if MAX_TIMESTAMP in specs.values() else (2 if isolation_level else None)

        def build(group: dict[TopicPartition, int], version: int, deadline: Deadline) -> ListOffsetsRequest:
            by_topic: dict[str, list[ListOffsetsPartition]] = {}
            for tp, ts in group.items():
                by_topic.setdefault(tp.topic, []).append(
                    ListOffsetsPartition(partition_index=tp.partition, timestamp=ts, max_num_offsets=1)
                )
            return ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            )

        def parse(response: Any) -> dict[TopicPartition, Outcome]:
            out: dict[TopicPartition, Outcome] = {}
            for t in response.topics:
                for p in t.partitions:
                    offset, ts = p.offset, p.timestamp
                    if p.old_style_offsets:  # v0
                        offset, ts = p.old_style_offsets[0], -1
                    out[TopicPartition(t.name, p.partition_index)] = (
                        p.error_code,
                        None,
                        (offset, ts, p.leader_epoch),
                    )
            return out

        outcomes = self._per_leader(
            specs, ApiKey.LIST_OFFSETS, build, parse, deadline, min_version=min_version
        )
        results = {}
        for tp in specs:
            code, message, payload = outcomes[tp]
            if code or payload is None:
                results[tp] = OffsetResult(tp, error_code=code, error_message=message)
            else:
                offset, ts, epoch = payload
                results[tp] = OffsetResult(tp, offset, ts, epoch)
        return results

    def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> dict[TopicPartition, DeleteRecordsResult]:
        """Delete the records below each offset (DeleteRecords, to each leader): the log start offset
        moves up to it. Offset -1 means the high watermark (delete everything)."""
        items = {TopicPartition(*tp): int(o) for tp, o in offsets.items()}
        if not items:
            return {}
        deadline = self._deadline(timeout)

        def build(group: dict[TopicPartition, int], version: int, deadline: Deadline) -> DeleteRecordsRequest:
            by_topic: dict[str, list[DeleteRecordsPartition]] = {}
            for tp, offset in group.items():
                by_topic.setdefault(tp.topic, []).append(
                    DeleteRecordsPartition(partition_index=tp.partition, offset=offset)
                )
            return DeleteRecordsRequest(
                topics=[DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                timeout_ms=self._request_timeout_ms(deadline),
            )

        def parse(response: Any) -> dict[TopicPartition, Outcome]:
            return {
                TopicPartition(t.name, p.partition_index): (p.error_code, None, p.low_watermark)
                for t in response.topics
                for p in t.partitions
            }

        outcomes = self._per_leader(items, ApiKey.DELETE_RECORDS, build, parse, deadline)
        results = {}
        for tp in items:
            code, message, low = outcomes[tp]
            results[tp] = (
                DeleteRecordsResult(tp, error_code=code, error_message=message)
                if code
                else DeleteRecordsResult(tp, low if low is not None else -1)
            )
        return results

    # ------------------------------------------------------------------------------ cluster

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        """The cluster id, the controller and the brokers (DescribeCluster, else Metadata)."""
        deadline = self._deadline(timeout)

        def call() -> ClusterDescription:
            conn = self.cluster.any_connection(deadline=deadline)
            if conn.supports(ApiKey.DESCRIBE_CLUSTER):
                r = conn.request(
                    ApiKey.DESCRIBE_CLUSTER,
                    DescribeClusterRequest(include_cluster_authorized_operations=False),
                    timeout=deadline.timeout(self.config.request_timeout),
                )
                if r.error_code:
                    raise BrokerResponseError(r.error_code, r.error_message, context="DescribeCluster")
                brokers = tuple(
                    sorted(
                        (BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in r.brokers),
                        key=lambda b: b.node_id,
                    )
                )
                return ClusterDescription(r.cluster_id, r.controller_id, brokers)
            metadata = self.cluster.refresh_metadata([], deadline=deadline)
            return ClusterDescription(
                metadata.cluster_id,
                metadata.controller_id,
                tuple(sorted(metadata.brokers.values(), key=lambda b: b.node_id)),
            )

        return self.cluster.retry(call, deadline=deadline)

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        topic_partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[int, list[LogDirDescription]]:
        """The log directories of brokers (DescribeLogDirs, to each broker; all brokers by default)
        and, in each, the replicas of ``topic_partitions`` (all partitions by default) with their
        size on disk. Raises if a broker cannot be asked by the deadline."""
        deadline = self._deadline(timeout)
        if brokers is None:
            brokers = [b.node_id for b in self.describe_cluster(timeout=deadline.remaining()).brokers]
        topics: list[DescribableLogDirTopic] | None = None
        if topic_partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in topic_partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [
                DescribableLogDirTopic(topic=t, partitions=sorted(set(ps))) for t, ps in by_topic.items()
            ]
            if not topics:
                return {broker_id: [] for broker_id in brokers}
        request = DescribeLogDirsRequest(topics=topics)

        def ask(broker_id: int) -> list[LogDirDescription]:
            conn = self.cluster.connection(broker_id, deadline=deadline)
            if not conn.supports(ApiKey.DESCRIBE_LOG_DIRS):
                raise IncompatibleBrokerError(f"broker {broker_id} does not answer DescribeLogDirs")
            r = conn.request(
                ApiKey.DESCRIBE_LOG_DIRS, request, timeout=deadline.timeout(self.config.request_timeout)
            )
            if r.error_code:
                raise BrokerResponseError(
                    r.error_code, None, context=f"DescribeLogDirs on broker {broker_id}"
                )
            return [_log_dir(broker_id, result) for result in r.results]

        return {
            broker_id: self.cluster.retry(lambda b=broker_id: ask(b), deadline=deadline)
            for broker_id in sorted(set(brokers))
        }


# ----------------------------------------------------------------------------------------- encoding


def _log_dir(broker_id: int, result: Any) -> LogDirDescription:
    replicas = sorted(
        (
            ReplicaLogInfo(
                TopicPartition(t.name, p.partition_index), p.partition_size, p.offset_lag, p.is_future_key
            )
            for t in result.topics
            for p in t.partitions
        ),
        key=lambda r: (r.topic_partition, r.is_future),
    )
    return LogDirDescription(
        broker_id=broker_id,
        path=result.log_dir,
        replicas=tuple(replicas),
        total_bytes=result.total_bytes,
        usable_bytes=result.usable_bytes,
        error_code=result.error_code,
    )


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


def _config_entry(c: Any, resource_type: int) -> ConfigEntry:
    source_code = getattr(c, "config_source", -1)
    if source_code is None or source_code < 0:  # DescribeConfigs v0: only is_default
        if c.is_default:
            source = ConfigSource.DEFAULT_CONFIG
        elif resource_type == TOPIC_RESOURCE:
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            source = ConfigSource.STATIC_BROKER_CONFIG
    else:
        source = ConfigSource.of(source_code)
    synonyms = tuple(ConfigSynonym(s.name, s.value, ConfigSource.of(s.source)) for s in (c.synonyms or []))
    return ConfigEntry(
        name=c.name,
        value=c.value,
        source=source,
        is_default=source is ConfigSource.DEFAULT_CONFIG,
        read_only=bool(c.read_only),
        synonyms=synonyms,
        is_sensitive=bool(c.is_sensitive),
    )

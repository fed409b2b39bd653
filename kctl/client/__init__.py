"""Producer, consumer and admin clients used by the CLI, the mirror maker, Spark and the tests.

Layout (each module imports only those above it, plus ``kctl.protocol``/``kctl.records``):

* ``errors``     — ``KafkaError`` and its kinds (connection, timeout, protocol, broker error codes).
* ``config``     — ``ClientConfig``: the shared settings under Kafka's client property names.
* ``types``      — the cluster metadata snapshot types (``TopicPartition`` is kctl.common's, exported here).
* ``connection`` — ``BrokerConnection``: one blocking socket, ApiVersions handshake, version
  negotiation, pipelined requests matched by correlation id.
* ``cluster``    — ``ClusterClient``: bootstrap, metadata, a connection per broker, leader and
  controller lookup, retries with backoff under a deadline.
* ``admin``      — ``AdminClient``: topics, partitions, configs, offsets, records, the cluster.
* ``partitioner``— producer partitioners (Java-compatible murmur2, sticky, round-robin, random).
* ``producer``   — ``Producer``: batching per partition, linger, compression, acks, retries,
  idempotence, futures; ``producer_config`` its settings.
* ``fetcher``/``consumer`` — ``Consumer``: assign/seek, long-poll fetching, the simple ``fetch``.
* ``offsets_spec`` — the offset grammar (beginning, end, N, -N, @time, @-1h, ranges).
* ``consumer_protocol``, ``group_config`` — the consumer protocol's encoding and group settings;
  ``group/`` — consumer groups: membership, assignors, ``GroupConsumer`` (subscribe), ``GroupAdmin``
  and rewinding offsets.
"""

from kctl.client.admin import (
    AdminClient,
    AdminOperationError,
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    CreateTopicResult,
    DeleteRecordsResult,
    NewTopic,
    OffsetResult,
    PartitionInfo,
    Result,
    TopicConfigs,
    TopicDescription,
    raise_for_errors,
)
from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.config import ClientConfig, ClientConfigError
from kctl.client.connection import BrokerConnection, InFlightRequest, negotiate_version, parse_bootstrap
from kctl.client.consumer import (
    Consumer,
    ConsumerConfig,
    ConsumerRecord,
    CorruptRecordError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    TimestampType,
    fetch,
)
from kctl.client.errors import (
    BrokerNotAnsweringError,
    BrokerResponseError,
    IncompatibleBrokerError,
    KafkaAuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kctl.client.group import (
    CommitFailedError,
    GroupAdmin,
    GroupConsumer,
    GroupDescription,
    GroupMembership,
    GroupMembershipError,
    GroupNotEmptyError,
)
from kctl.client.offsets_spec import (
    OffsetAndTimestamp,
    OffsetPoint,
    OffsetRange,
    OffsetSpec,
    OffsetSpecError,
    parse_offset_point,
    parse_offset_spec,
    resolve_points,
    resolve_ranges,
)
from kctl.client.producer import (
    DeliveryTimeoutError,
    Producer,
    ProducerClosedError,
    RecordFuture,
    RecordMetadata,
)
from kctl.client.producer_config import ProducerConfig
from kctl.client.types import BrokerInfo, ClusterMetadata, PartitionMetadata, TopicMetadata
from kctl.common.topic_partition import TopicPartition

__all__ = [
    "AdminClient",
    "AdminOperationError",
    "AlterConfigOp",
    "BrokerConnection",
    "BrokerInfo",
    "BrokerNotAnsweringError",
    "BrokerResponseError",
    "ClientConfig",
    "ClientConfigError",
    "ClusterClient",
    "ClusterDescription",
    "ClusterMetadata",
    "CommitFailedError",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "CorruptRecordError",
    "CreateTopicResult",
    "Deadline",
    "DeleteRecordsResult",
    "DeliveryTimeoutError",
    "GroupAdmin",
    "GroupConsumer",
    "GroupDescription",
    "GroupMembership",
    "GroupMembershipError",
    "GroupNotEmptyError",
    "InFlightRequest",
    "IncompatibleBrokerError",
    "KafkaAuthenticationError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaProtocolError",
    "KafkaTimeoutError",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "OffsetPoint",
    "OffsetRange",
    "OffsetResult",
    "OffsetSpec",
    "OffsetSpecError",
    "PartitionInfo",
    "PartitionMetadata",
    "Producer",
    "ProducerClosedError",
    "ProducerConfig",
    "RecordFuture",
    "RecordMetadata",
    "Result",
    "TimestampType",
    "TopicConfigs",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartition",
    "fetch",
    "negotiate_version",
    "parse_bootstrap",
    "parse_offset_point",
    "parse_offset_spec",
    "raise_for_errors",
    "resolve_points",
    "resolve_ranges",
]

"""Producer, consumer and admin clients used by the CLI, the mirror maker, Spark and the tests.

Layout (each module imports only those above it, plus ``kctl.protocol``/``kctl.records``):

* ``errors``     — ``KafkaError`` and its kinds (connection, timeout, protocol, broker error codes).
* ``config``     — ``ClientConfig``: the shared settings under Kafka's client property names.
* ``types``      — ``TopicPartition`` and the cluster metadata snapshot types.
* ``connection`` — ``BrokerConnection``: one blocking socket, ApiVersions handshake, version
  negotiation, pipelined requests matched by correlation id.
* ``cluster``    — ``ClusterClient``: bootstrap, metadata, a connection per broker, leader and
  controller lookup, retries with backoff under a deadline.
* ``admin``      — ``AdminClient``: topics, partitions, configs, offsets, records, the cluster.
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
from kctl.client.errors import (
    BrokerResponseError,
    IncompatibleBrokerError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from kctl.client.types import BrokerInfo, ClusterMetadata, PartitionMetadata, TopicMetadata, TopicPartition

__all__ = [
    "AdminClient",
    "AdminOperationError",
    "AlterConfigOp",
    "BrokerConnection",
    "BrokerInfo",
    "BrokerResponseError",
    "ClientConfig",
    "ClientConfigError",
    "ClusterClient",
    "ClusterDescription",
    "ClusterMetadata",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "CreateTopicResult",
    "Deadline",
    "DeleteRecordsResult",
    "InFlightRequest",
    "IncompatibleBrokerError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaProtocolError",
    "KafkaTimeoutError",
    "NewTopic",
    "OffsetResult",
    "PartitionInfo",
    "PartitionMetadata",
    "Result",
    "TopicConfigs",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartition",
    "negotiate_version",
    "parse_bootstrap",
    "raise_for_errors",
]

"""The admin client (``AdminClient``): topics, partitions, configs, offsets, records and the
cluster, over Kafka's admin APIs.

* ``results`` — the result dataclasses and enums (``Result``, ``TopicDescription``, ``ConfigEntry``,
  ``ConfigSource``, ``AlterConfigOp``, ``NewTopic``, ...) and ``raise_for_errors``.
* ``base``    — the connection, deadlines and the retry engine the operations share.
* ``topics``, ``configs``, ``records`` (list offsets, delete records), ``cluster`` (describe the
  cluster, log dirs), ``reassignments`` (leader elections, partition reassignments) — the operations,
  by subject.
* ``client``  — ``AdminClient``, which has them all.
* ``overview`` — views built from several calls: the cluster at a glance, each partition's offset at a
  point of the offset grammar, trim plans (DeleteRecords up to a point).
"""

from kctl.client.admin.base import Outcome
from kctl.client.admin.client import AdminClient
from kctl.client.admin.cluster import BrokerLogDirs
from kctl.client.admin.configs import BROKER_RESOURCE, TOPIC_RESOURCE
from kctl.client.admin.reassignments import PartitionReassignment, PartitionResult
from kctl.client.admin.records import EARLIEST, LATEST, MAX_TIMESTAMP, OFFSET_SPECS, OffsetSpec
from kctl.client.admin.results import (
    AdminOperationError,
    ClusterDescription,
    ConfigEntry,
    ConfigSynonym,
    CreateTopicResult,
    DeleteRecordsResult,
    LogDirDescription,
    NewTopic,
    PartitionInfo,
    ReplicaLogInfo,
    Result,
    TopicConfigs,
    TopicDescription,
    raise_for_errors,
)
from kctl.client.consumer.offsets import OffsetResult
from kctl.protocol.configs import AlterConfigOp, ConfigSource

__all__ = [
    "BROKER_RESOURCE",
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "OFFSET_SPECS",
    "TOPIC_RESOURCE",
    "AdminClient",
    "AdminOperationError",
    "AlterConfigOp",
    "BrokerLogDirs",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "CreateTopicResult",
    "DeleteRecordsResult",
    "LogDirDescription",
    "NewTopic",
    "OffsetResult",
    "OffsetSpec",
    "Outcome",
    "PartitionInfo",
    "PartitionReassignment",
    "PartitionResult",
    "ReplicaLogInfo",
    "Result",
    "TopicConfigs",
    "TopicDescription",
    "raise_for_errors",
]

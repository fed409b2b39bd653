"""The admin client's results and values: the outcome of an operation per topic, partition or
broker (``Result`` and its kinds, carrying Kafka's error name), the enums of configs
``NewTopic``, and ``raise_for_errors`` (the config wire enums live in kctl.protocol.configs)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from kctl.client.errors import (
    BrokerResponseError,
)
from kctl.client.types import BrokerInfo, TopicMetadata
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import error_name
from kctl.protocol.configs import ConfigSource


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

    @property
    def default_value(self) -> str | None:
        """The built-in default: the DEFAULT_CONFIG synonym's value (or the value, when it is the
        default); None when the broker did not say."""
        for synonym in self.synonyms:
            if synonym.source is ConfigSource.DEFAULT_CONFIG:
                return synonym.value
        return self.value if self.source is ConfigSource.DEFAULT_CONFIG else None

    def as_row(self) -> dict[str, object]:
        """The config as an output row: value (hidden when sensitive), built-in default, source
        (Kafka's config source name), read-only, sensitive."""
        return {
            "name": self.name,
            "value": None if self.is_sensitive else self.value,
            "default": self.default_value,
            "source": self.source.name,
            "read_only": self.read_only,
            "sensitive": self.is_sensitive,
        }


@dataclasses.dataclass(frozen=True)
class TopicConfigs(Result):
    """The configs of one topic (empty on error)."""

    entries: tuple[ConfigEntry, ...] = ()

    def non_default(self) -> list[ConfigEntry]:
        """The entries whose value does not come from the built-in default."""
        return [e for e in self.entries if e.source is not ConfigSource.DEFAULT_CONFIG and not e.is_default]


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

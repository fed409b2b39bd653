"""Topic administration by the broker handling the request: validate, choose replica assignments
(kctl.broker.controller.placement, over the live brokers and their racks), write topics, partitions
and configs to the registry. The partitions' first states (leaders) are the controller's to write
(decision 7): ``initialize_partitions`` asks this broker's controller to do it at once when it is
the active one (always so in embedded mode); otherwise the controller hears of the new topic
through its watch. Used by CreateTopics, DeleteTopics, CreatePartitions, the config APIs and topic
auto-creation."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kctl.broker.config import BrokerConfig
from kctl.broker.controller.placement import InvalidReplicationFactorError, assign_replicas
from kctl.broker.errors import ApiError
from kctl.broker.metadata_cache import INTERNAL_TOPICS, MetadataCache
from kctl.log.config import InvalidConfigError
from kctl.log.naming import validate_topic_name
from kctl.protocol.errors import ErrorCode
from kctl.zk.model import TopicExistsError, TopicRecord, UnknownTopicError
from kctl.zk.registry import Registry

MAX_PARTITIONS = 100_000


class TopicAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        registry: Registry,
        metadata: MetadataCache,
        broker_id: int,
        *,
        initialize_partitions: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.metadata = metadata
        self.broker_id = broker_id
        self._initialize_partitions = initialize_partitions

    def _live_broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.metadata.brokers())

    def _place(self, partitions: range, factor: int) -> dict[int, tuple[int, ...]]:
        racks = {b.broker_id: b.rack for b in self.metadata.brokers()}
        try:
            return assign_replicas(racks, partitions, factor)
        except InvalidReplicationFactorError as error:
            raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, str(error)) from None

    def _elect_leaders(self) -> None:
        if self._initialize_partitions is not None:
            self._initialize_partitions()

    def validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        clean = {k: v for k, v in configs.items() if v is not None}
        try:
            self.config.validate_topic_overrides(clean)
        except (InvalidConfigError, ValueError) as error:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(error)) from None
        return clean

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignment: Mapping[int, tuple[int, ...]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        internal: bool = False,
    ) -> TopicRecord | None:
        try:
            validate_topic_name(name)
        except ValueError as error:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(error)) from None
        if name in INTERNAL_TOPICS and not internal:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is an internal topic")
        if self.metadata.topic(name) is not None:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        clean_configs = self.validate_configs(configs or {})
        live = self._live_broker_ids()
        if assignment:
            if num_partitions != -1 or replication_factor != -1:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    "give either an assignment or num_partitions/replication_factor, not both",
                )
            if sorted(assignment) != list(range(len(assignment))):
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
            for partition, replicas in assignment.items():
                if not replicas or len(set(replicas)) != len(replicas):
                    raise ApiError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {partition}: bad replicas"
                    )
                unknown = set(replicas) - set(live)
                if unknown:
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown brokers {sorted(unknown)}")
            chosen = {p: tuple(r) for p, r in assignment.items()}
        else:
            partitions = self.config["num.partitions"] if num_partitions == -1 else num_partitions
            factor = (
                self.config["default.replication.factor"] if replication_factor == -1 else replication_factor
            )
            if not 1 <= partitions <= MAX_PARTITIONS:
                raise ApiError(ErrorCode.INVALID_PARTITIONS, f"number of partitions {partitions} is invalid")
            if factor < 1:
                raise ApiError(
                    ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {factor} is invalid"
                )
            if factor > len(live):
                raise ApiError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"replication factor {factor} is larger than the {len(live)} available broker(s)",
                )
            chosen = self._place(range(partitions), factor)
        if validate_only:
            return None
        try:
            record = self.registry.create_topic(name, chosen, clean_configs)
        except TopicExistsError:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists") from None
        self._elect_leaders()
        self.metadata.refresh()
        return record

    def delete_topic(self, name: str) -> None:
        if not self.config["delete.topic.enable"]:
            raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        if name in INTERNAL_TOPICS:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is an internal topic")
        try:
            self.registry.delete_topic(name)
        except UnknownTopicError:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist") from None
        self.metadata.refresh()

    def create_partitions(
        self,
        name: str,
        count: int,
        assignment: list[tuple[int, ...]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        record = self.metadata.topic(name)
        if record is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        current = len(record.assignment)
        if count <= current:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {current} partitions; the new count {count} must be larger",
            )
        if count > MAX_PARTITIONS:
            raise ApiError(ErrorCode.INVALID_PARTITIONS, f"{count} partitions is too many")
        new = range(current, count)
        live = self._live_broker_ids()
        factor = len(record.assignment[0])
        if assignment:
            if len(assignment) != len(new):
                raise ApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"{len(assignment)} assignments given for {len(new)} new partitions",
                )
            for replicas in assignment:
                if (
                    len(replicas) != factor
                    or set(replicas) - set(live)
                    or len(set(replicas)) != len(replicas)
                ):
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"invalid replicas {list(replicas)}")
            chosen = dict(zip(new, (tuple(r) for r in assignment), strict=True))
        else:
            if factor > len(live):
                raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, "not enough live brokers")
            chosen = self._place(new, factor)
        if validate_only:
            return
        self.registry.add_partitions(name, chosen)
        self._elect_leaders()
        self.metadata.refresh()

    def set_topic_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        if self.metadata.topic(name) is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        clean = self.validate_configs(configs)
        if validate_only:
            return
        self.registry.set_topic_configs(name, clean)
        self.metadata.refresh()

"""Topic administration by the broker handling the request: validate, choose replica assignments
(kctl.broker.controller.placement, over the live brokers and their racks), write topics, partitions
and configs to the registry. The partitions' first states (leaders) are the controller's to write
(decision 7): ``initialize_partitions`` asks this broker's controller to do it at once when it is
the active one (always so in embedded mode); otherwise the controller hears of the new topic
through its watch. Used by CreateTopics, DeleteTopics, CreatePartitions, the config APIs and topic
auto-creation.

A create is planned (validated, placed: ``plan_topic``, ``plan_partitions``) then committed: the
registry writes of one commit — the topic or its new partitions and the first partition states the
controller writes — are one write of the embedded registry (``Registry.write_batch``). The
CreateTopics and CreatePartitions handlers create the new partitions' logs before the commit
(``create_hosted_logs``: in a worker thread, a slice at a time, so the event loop keeps serving and a
stopping broker cancels it between slices) and commit in a worker thread too. A request may ask for
at most ``MAX_PARTITIONS_PER_REQUEST`` new partitions in all (Kafka's limit and answer:
POLICY_VIOLATION)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kctl.broker.config import BrokerConfig
from kctl.broker.controller.placement import InvalidReplicationFactorError, assign_replicas
from kctl.broker.errors import ApiError
from kctl.broker.metadata_cache import INTERNAL_TOPICS, MetadataCache
from kctl.common.topic_partition import TopicPartition
from kctl.log.config import InvalidConfigError
from kctl.log.manager import LogManager
from kctl.log.naming import validate_topic_name
from kctl.protocol.errors import ErrorCode
from kctl.zk.model import (
    BrokerRegistration,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    RegistryError,
    TopicExistsError,
    TopicRecord,
    UnknownTopicError,
)
from kctl.zk.registry import ConfigStore, TopicStore

log = logging.getLogger("kctl.broker.topics")

T = TypeVar("T")

MAX_PARTITIONS = 100_000
#: new partitions one CreateTopics or CreatePartitions request may ask for, all topics together
#: (Kafka's MAX_PARTITIONS_PER_BATCH, answered with POLICY_VIOLATION)
MAX_PARTITIONS_PER_REQUEST = 10_000
#: logs created per step of ``create_hosted_logs`` (a worker thread's turn between cancellation points)
LOG_CREATION_SLICE = 200


@dataclass(frozen=True)
class PartitionPlan:
    """What a create will write: the topic, the replicas of each new partition, its config overrides."""

    name: str
    assignment: dict[int, tuple[int, ...]]
    configs: dict[str, str]


def check_request_partitions(total: int) -> None:
    """POLICY_VIOLATION when one request asks for more than ``MAX_PARTITIONS_PER_REQUEST`` new
    partitions (Kafka's message, with the figures)."""
    if total > MAX_PARTITIONS_PER_REQUEST:
        raise ApiError(
            ErrorCode.POLICY_VIOLATION,
            f"Excessively large number of partitions per request: {total} "
            f"(at most {MAX_PARTITIONS_PER_REQUEST})",
        )


async def create_hosted_logs(logs: LogManager, broker_id: int, plan: PartitionPlan) -> list[TopicPartition]:
    """Create the logs of the planned partitions this broker hosts, in a worker thread, a slice at a
    time (cancellable between slices). Returns the partitions whose log this call created (for
    ``discard_logs`` if the commit fails)."""
    config = logs.default_config.with_overrides(plan.configs)
    wanted = [
        TopicPartition(plan.name, p)
        for p, replicas in sorted(plan.assignment.items())
        if broker_id in replicas
    ]
    created: list[TopicPartition] = []

    def create(tps: list[TopicPartition]) -> None:
        for tp in tps:
            if logs.get_log(tp) is None:
                logs.get_or_create_log(tp, config)
                created.append(tp)

    for start in range(0, len(wanted), LOG_CREATION_SLICE):
        step = asyncio.ensure_future(asyncio.to_thread(create, wanted[start : start + LOG_CREATION_SLICE]))
        try:
            await asyncio.shield(step)
        except BaseException:
            with contextlib.suppress(BaseException):
                await step  # the thread finishes its slice: then nothing it made is left behind
            discard_logs(logs, created)
            raise
    return created


def discard_logs(logs: LogManager, created: list[TopicPartition]) -> None:
    """Delete the logs ``create_hosted_logs`` made for a create that was not committed."""
    for tp in created:
        logs.delete_log(tp)


def _create_error(plan: PartitionPlan, error: RegistryError) -> ApiError:
    """Kafka's answer for a topic the registry refused to create."""
    if isinstance(error, TopicExistsError):
        return ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {plan.name!r} already exists")
    if isinstance(error, InvalidTopicError):
        return ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(error))
    if isinstance(error, InvalidReplicaAssignmentError):
        return ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(error))
    raise error


class TopicRegistry(TopicStore, ConfigStore, Protocol):
    """The parts of the registry topic administration uses: topics and their configs, which it
    writes, and the live brokers, which it places replicas on."""

    def live_brokers(self) -> list[BrokerRegistration]: ...


class TopicAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        registry: TopicRegistry,
        metadata: MetadataCache,
        broker_id: int,
        *,
        initialize_partitions: Callable[[], None] | None = None,
        on_created: Callable[[], None] | None = None,
    ) -> None:
        """``initialize_partitions``: after a topic or partitions were written, the controller's first
        states (when this broker is the controller); ``on_created``: after this broker created a topic
        on its own account (auto-creation, an internal topic), bring the hosted partitions in line."""
        self.config = config
        self.registry = registry
        self.metadata = metadata
        self.broker_id = broker_id
        self._initialize_partitions = initialize_partitions
        self._on_created = on_created or (lambda: None)

    async def live_brokers(self) -> list[BrokerRegistration]:
        """The live brokers as the registry has them now, read off the event loop: what an admin
        request places replicas on. Not the metadata cache: a broker registered a moment ago counts
        even while the refresh that will show it here is still reading (kctl.broker.metadata_refresh)."""
        return await asyncio.to_thread(self.registry.live_brokers)

    def _brokers(self, brokers: Sequence[BrokerRegistration] | None) -> Sequence[BrokerRegistration]:
        return self.metadata.brokers() if brokers is None else brokers

    def _live_broker_ids(self, brokers: Sequence[BrokerRegistration] | None = None) -> list[int]:
        return sorted(b.broker_id for b in self._brokers(brokers))

    def _place(
        self, partitions: range, factor: int, brokers: Sequence[BrokerRegistration] | None = None
    ) -> dict[int, tuple[int, ...]]:
        racks = {b.broker_id: b.rack for b in self._brokers(brokers)}
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

    def auto_create_topic(self, name: str) -> None:
        """Create ``name`` with the broker's defaults (Metadata, Produce: auto.create.topics.enable)."""
        self.create_topic(name)
        self._on_created()
        log.info("auto-created topic %s", name)

    def ensure_topic_for_produce(self, name: str) -> None:
        """Before a produce to ``name``: auto-create it when it does not exist and the broker allows
        it (a concurrent creation is fine); raises ApiError(UNKNOWN_TOPIC_OR_PARTITION) otherwise."""
        if self.metadata.topic(name) is not None:
            return
        if not self.config["auto.create.topics.enable"]:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        try:
            self.auto_create_topic(name)
        except ApiError as error:
            if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    def ensure_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        """Create the internal topic ``name`` unless it exists (from whichever broker is asked first,
        as Kafka's brokers do: the registry's create is atomic, a concurrent creation is fine); raises
        the ApiError of a creation that failed otherwise (too few brokers for the factor)."""
        if self.metadata.topic(name) is not None:
            return
        try:
            self.create_topic(name, num_partitions, replication_factor, configs=configs, internal=True)
        except ApiError as error:
            if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        self._on_created()

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
        """Plan and commit in one call (topic auto-creation, __consumer_offsets)."""
        plan = self.plan_topic(
            name, num_partitions, replication_factor, assignment, configs, internal=internal
        )
        return None if validate_only else self.commit_topic(plan)

    def plan_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignment: Mapping[int, tuple[int, ...]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        *,
        internal: bool = False,
        brokers: Sequence[BrokerRegistration] | None = None,
    ) -> PartitionPlan:
        """Validate a new topic and place its replicas (on ``brokers``: by default the metadata
        cache's live brokers); writes nothing."""
        try:
            validate_topic_name(name)
        except ValueError as error:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(error)) from None
        if name in INTERNAL_TOPICS and not internal:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is an internal topic")
        if self.metadata.topic(name) is not None:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        clean_configs = self.validate_configs(configs or {})
        live = self._live_broker_ids(brokers)
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
            chosen = self._place(range(partitions), factor, brokers)
        return PartitionPlan(name, chosen, clean_configs)

    def commit_topic(self, plan: PartitionPlan) -> TopicRecord:
        """Write the planned topic and its first partition states (one embedded-registry write)."""
        [outcome] = self.commit_topics([plan])
        if isinstance(outcome, ApiError):
            raise outcome
        return outcome

    def commit_topics(self, plans: Sequence[PartitionPlan]) -> list[TopicRecord | ApiError]:
        """Write the planned topics, then their first partition states, then refresh the metadata
        once for them all (a CreateTopics of a hundred topics reads the cluster's state once, not a
        hundred times); per plan, its topic or why it was not created."""

        def write() -> list[TopicRecord | ApiError]:
            written = self.registry.create_topics(
                [(plan.name, dict(plan.assignment), dict(plan.configs)) for plan in plans]
            )
            return [
                outcome if isinstance(outcome, TopicRecord) else _create_error(plan, outcome)
                for plan, outcome in zip(plans, written, strict=True)
            ]

        return self._write_and_elect(len(plans), write, lambda outcome: not isinstance(outcome, ApiError))

    def _write_and_elect(
        self, count: int, write: Callable[[], list[T]], succeeded: Callable[[T], bool]
    ) -> list[T | ApiError]:
        """The registry writes of one request (``write``: ``count`` outcomes; one embedded-registry
        write), then the controller's first states when any ``succeeded``, then one metadata
        refresh. A registry file that cannot be written (a full disk) fails all ``count``."""
        try:
            with self.registry.write_batch():
                written = write()
                if any(succeeded(outcome) for outcome in written):
                    self._elect_leaders()
        except OSError as error:  # the embedded registry's file could not be written (a full disk)
            failure = ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot store the cluster metadata: {error}")
            return [failure for _ in range(count)]
        self.metadata.refresh()
        return list(written)

    def delete_topic(self, name: str) -> None:
        outcome = self.delete_topics([name])[0]
        if outcome is not None:
            raise outcome

    def delete_topics(self, names: Sequence[str]) -> list[ApiError | None]:
        """Delete ``names``, then refresh the metadata once for them all (a DeleteTopics of a hundred
        topics reads the cluster's state once, not a hundred times; blocking: the DeleteTopics
        handler runs it in a worker thread); per name, None or why it was not deleted."""
        outcomes: list[ApiError | None] = [self._refusal(name) for name in names]
        allowed = [name for name, outcome in zip(names, outcomes, strict=True) if outcome is None]
        # together: ZooKeeper deletes them in one multi-op, so every broker refreshes once for them
        deleted = iter(self.registry.delete_topics(allowed) if allowed else [])
        for index, outcome in enumerate(outcomes):
            if outcome is not None:
                continue
            failure = next(deleted)
            if isinstance(failure, UnknownTopicError):
                outcomes[index] = ApiError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {names[index]!r} does not exist"
                )
            elif failure is not None:
                raise failure
        if any(outcome is None for outcome in outcomes):
            self.metadata.refresh()
        return outcomes

    def _refusal(self, name: str) -> ApiError | None:
        """Why ``name`` may not be deleted (None: it may)."""
        if not self.config["delete.topic.enable"]:
            return ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        if name in INTERNAL_TOPICS:
            return ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is an internal topic")
        return None

    def create_partitions(
        self,
        name: str,
        count: int,
        assignment: list[tuple[int, ...]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        plan = self.plan_partitions(name, count, assignment)
        if not validate_only:
            self.commit_partitions(plan)

    def plan_partitions(
        self,
        name: str,
        count: int,
        assignment: list[tuple[int, ...]] | None = None,
        *,
        brokers: Sequence[BrokerRegistration] | None = None,
    ) -> PartitionPlan:
        """Validate a topic's growth to ``count`` partitions and place the new ones (on ``brokers``,
        as ``plan_topic``); writes nothing."""
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
        live = self._live_broker_ids(brokers)
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
            chosen = self._place(new, factor, brokers)
        return PartitionPlan(name, chosen, dict(record.configs))

    def commit_partitions(self, plan: PartitionPlan) -> None:
        """Write the planned partitions and their first states (one embedded-registry write)."""
        [outcome] = self.commit_partitions_of([plan])
        if outcome is not None:
            raise outcome

    def commit_partitions_of(self, plans: Sequence[PartitionPlan]) -> list[ApiError | None]:
        """Write the planned partitions of several topics, then their first states, then refresh the
        metadata once for them all (the controller's pass over every partition state runs once per
        CreatePartitions, not once per topic); per plan, None or why it was not grown."""
        return self._write_and_elect(
            len(plans), lambda: [self._add_partitions(plan) for plan in plans], lambda out: out is None
        )

    def _add_partitions(self, plan: PartitionPlan) -> ApiError | None:
        try:
            self.registry.add_partitions(plan.name, plan.assignment)
        except UnknownTopicError:
            return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {plan.name!r} does not exist")
        except InvalidPartitionsError as error:  # another request grew the topic meanwhile
            return ApiError(ErrorCode.INVALID_PARTITIONS, str(error))
        return None

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

"""The ZooKeeper registry's topics and partition states (kctl.zk.registry.TopicStore, on the
registry's shared session: kctl.zk.zookeeper_session).

This module owns the reads and writes of /brokers/topics: creating, deleting and growing topics,
their topic ids (a topic written without one, by Kafka before 2.8 or by hand, gets one on first
read, as Kafka's controller assigns them), the reads and version-checked writes of partition
states, and the controller's fenced writes of states and replica assignments (one multi-op behind a
check of /controller_epoch's version, Kafka's ``checkControllerAndUpdate``). A topic's config
overrides are read with it and written with it at creation; changing them is
kctl.zk.zookeeper_configs' business. Topic deletion is done directly (the topic's znodes, its
partition states, its config overrides, and any /admin/delete_topics marker), not by marking the
topic and waiting for a controller."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import ZnodeStat

from kctl.zk.model import (
    ControllerFence,
    ControllerMovedError,
    PartitionState,
    PartitionStateConflictError,
    PartitionStateUpdate,
    RegistryError,
    TopicExistsError,
    TopicRecord,
    UnknownTopicError,
    check_topic_collisions,
    encode_uuid,
    random_kafka_uuid,
    validate_new_partitions,
    validate_replica_assignment,
    validate_topic_name,
)
from kctl.zk.registry import PARTITIONS, TOPICS, TopicStore
from kctl.zk.znodes import (
    ConfigEntityZNode,
    ControllerEpochZNode,
    DeleteTopicsTopicZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
    ZNodeDecodeError,
)
from kctl.zk.zookeeper_session import ZooKeeperPart, collect

__all__ = ["ZooKeeperTopics"]

log = logging.getLogger("kctl.zk.zookeeper")

_RETRIES = 10
CREATE_CHUNK = 50
"""Topics written per multi-op by `create_topics` (well under ZooKeeper's 1 MB request limit)."""


class ZooKeeperTopics(ZooKeeperPart, TopicStore):
    """Topics and partition states in /brokers/topics (Kafka's layout)."""

    # -- topics ------------------------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        configs: dict[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> TopicRecord:
        """Kafka's AdminZkClient order: the config overrides are written (or overwritten, if a
        deleted topic left some), then the topic znode — here both in one multi-op."""
        validate_topic_name(name)
        normalized = validate_replica_assignment(assignment)
        record = TopicRecord(name, topic_id or random_kafka_uuid(), normalized, dict(configs))
        client = self._zk_client()
        topic_path = TopicZNode.path(name)
        config_path = ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, name)
        with self._zk(f"create topic {name}"):
            existing = client.get_children(TopicsZNode.path)
            if name in existing:
                raise TopicExistsError(f"Topic '{name}' already exists.")
            check_topic_collisions(name, existing)
            for _ in range(_RETRIES):
                transaction = client.transaction()
                config_stat = client.exists(config_path)
                config_data = ConfigEntityZNode.encode(record.configs)
                if config_stat is None:
                    transaction.create(config_path, config_data)
                else:
                    transaction.set_data(config_path, config_data, version=config_stat.version)
                transaction.create(topic_path, TopicZNode.encode(record.topic_id, record.assignment))
                results = transaction.commit()
                if not any(isinstance(r, Exception) for r in results):
                    break
                if isinstance(results[1], NodeExistsError):
                    raise TopicExistsError(f"Topic '{name}' already exists.")
            else:
                raise RegistryError(f"could not create topic {name}: {config_path} kept changing")
        self._notify(TOPICS)
        return record

    def create_topics(
        self, topics: Sequence[tuple[str, dict[int, tuple[int, ...]], dict[str, str]]]
    ) -> list[TopicRecord | RegistryError]:
        """Many `create_topic`s: the topic list read once, the config znodes looked up in one
        pipelined batch, then each chunk of ``CREATE_CHUNK`` topics written in one multi-op (a chunk
        that fails, e.g. a topic created by someone else meanwhile, is written topic by topic)."""
        client = self._zk_client()
        outcomes: list[TopicRecord | RegistryError | None] = [None] * len(topics)
        planned: list[tuple[int, TopicRecord]] = []
        with self._zk(f"create {len(topics)} topics"):
            existing = set(client.get_children(TopicsZNode.path))
            for index, (name, assignment, configs) in enumerate(topics):
                try:
                    validate_topic_name(name)
                    normalized = validate_replica_assignment(assignment)
                    if name in existing:
                        raise TopicExistsError(f"Topic '{name}' already exists.")
                    check_topic_collisions(name, existing)
                except RegistryError as error:
                    outcomes[index] = error
                    continue
                existing.add(name)  # a later topic of the batch may collide with it
                planned.append((index, TopicRecord(name, random_kafka_uuid(), normalized, dict(configs))))
            config_paths = [ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, r.name) for _, r in planned]
            stats = [
                result.get(timeout=self._op_timeout)
                for result in [client.exists_async(p) for p in config_paths]
            ]
            for start in range(0, len(planned), CREATE_CHUNK):
                end = start + CREATE_CHUNK
                chunk = list(zip(planned[start:end], stats[start:end], strict=True))
                transaction = client.transaction()
                for (_, record), config_stat in chunk:
                    config_path = ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, record.name)
                    config_data = ConfigEntityZNode.encode(record.configs)
                    if config_stat is None:
                        transaction.create(config_path, config_data)
                    else:
                        transaction.set_data(config_path, config_data, version=config_stat.version)
                    transaction.create(
                        TopicZNode.path(record.name), TopicZNode.encode(record.topic_id, record.assignment)
                    )
                results = transaction.commit()
                if not any(isinstance(r, Exception) for r in results):
                    for (index, record), _ in chunk:
                        outcomes[index] = record
                    continue
                for (index, record), _ in chunk:  # one at a time, with create_topic's own retries
                    try:
                        outcomes[index] = self.create_topic(
                            record.name, dict(record.assignment), dict(record.configs), record.topic_id
                        )
                    except RegistryError as error:
                        outcomes[index] = error
        self._notify(TOPICS)
        done = [outcome for outcome in outcomes if outcome is not None]
        assert len(done) == len(topics), "every topic has an outcome"
        return done

    def delete_topic(self, name: str) -> None:
        client = self._zk_client()
        topic_path = TopicZNode.path(name)
        with self._zk(f"delete topic {name}"):
            if client.exists(topic_path) is None:
                raise UnknownTopicError(f"Topic '{name}' does not exist.")
            for attempt in range(_RETRIES):
                if self._delete_in_one_transaction(client, name):
                    break
                try:
                    client.delete(topic_path, recursive=True)
                    break
                except NotEmptyError:  # a partition state was being written meanwhile
                    if attempt == _RETRIES - 1:
                        raise
            with contextlib.suppress(NoNodeError):
                client.delete(ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, name))
            with contextlib.suppress(NoNodeError):
                client.delete(DeleteTopicsTopicZNode.path(name))
        self._notify(TOPICS)

    def _delete_in_one_transaction(self, client: KazooClient, name: str) -> bool:
        """Delete the topic's znodes in Kafka's layout in one multi-op (`_doomed_paths`); False when
        the layout held something else or changed meanwhile (the caller deletes recursively)."""
        doomed = self._doomed_paths(client, [name])[name]
        if doomed is None or len(doomed) > MAX_MULTI_OPS:
            return False
        transaction = client.transaction()
        for path in doomed:
            transaction.delete(path)
        results = transaction.commit()
        return not any(isinstance(result, Exception) for result in results)

    def _doomed_paths(self, client: KazooClient, names: Sequence[str]) -> dict[str, list[str] | None]:
        """For each topic, its znodes in Kafka's layout, children first (its partitions' state
        znodes, the partition znodes, /partitions, the topic znode), read with two pipelined rounds
        for all the topics together; None for a topic whose layout holds something else."""
        listings = {name: client.get_children_async(TopicPartitionsZNode.path(name)) for name in names}
        numbers: dict[str, list[int] | None] = {}
        without_partitions: set[str] = set()  # no /partitions znode
        for name, listing in listings.items():
            try:
                partitions = listing.get(timeout=self._op_timeout)
            except NoNodeError:
                numbers[name] = []
                without_partitions.add(name)
                continue
            listed = [int(p) for p in partitions if p.isdigit()]
            numbers[name] = listed if len(listed) == len(partitions) else None
        pending = {
            (name, number): client.get_children_async(TopicPartitionZNode.path(name, number))
            for name, known in numbers.items()
            for number in known or ()
        }
        doomed: dict[str, list[str] | None] = {}
        for name in names:
            found = numbers[name]
            if found is None:
                doomed[name] = None
                continue
            paths: list[str] = []
            for number in found:
                try:
                    under = pending[(name, number)].get(timeout=self._op_timeout)
                except NoNodeError:
                    continue  # deleted meanwhile
                if set(under) - {"state"}:
                    doomed[name] = None
                    break
                if under:
                    paths.append(TopicPartitionStateZNode.path(name, number))
                paths.append(TopicPartitionZNode.path(name, number))
            else:
                if name not in without_partitions:
                    paths.append(TopicPartitionsZNode.path(name))
                paths.append(TopicZNode.path(name))
                doomed[name] = paths
        return doomed

    def delete_topics(self, names: Sequence[str]) -> list[RegistryError | None]:
        """Delete the topics ``names`` at once: one pipelined existence check, the znodes of all of
        them in one multi-op (so every broker sees them go together and refreshes its metadata
        once, not once per topic), then their config overrides and deletion marks; a topic whose
        layout is unusual, or a multi-op that fails, falls back to `delete_topic` one by one. Per
        name, None or the error (UnknownTopicError)."""
        client = self._zk_client()
        outcomes: list[RegistryError | None] = [None] * len(names)
        with self._zk(f"delete {len(names)} topic(s)"):
            checks = [client.exists_async(TopicZNode.path(name)) for name in names]
            present: list[str] = []
            for index, (name, check) in enumerate(zip(names, checks, strict=True)):
                if check.get(timeout=self._op_timeout) is None:
                    outcomes[index] = UnknownTopicError(f"Topic '{name}' does not exist.")
                else:
                    present.append(name)
            doomed = self._doomed_paths(client, present) if present else {}
            together = []
            usual = [name for name in present if 0 < len(doomed.get(name) or ()) <= MAX_MULTI_OPS]
            for chunk in _chunks(usual, doomed):
                transaction = client.transaction()
                for name in chunk:
                    for path in doomed[name] or ():
                        transaction.delete(path)
                results = transaction.commit()
                if not any(isinstance(result, Exception) for result in results):
                    together += chunk  # else nothing of the chunk was deleted: one by one below
            extras = [
                path
                for name in together
                for path in (
                    ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, name),
                    DeleteTopicsTopicZNode.path(name),
                )
            ]
            for deletion in [client.delete_async(path) for path in extras]:
                with contextlib.suppress(NoNodeError):
                    deletion.get(timeout=self._op_timeout)
        self._notify(TOPICS)
        for index, name in enumerate(names):
            if outcomes[index] is None and name not in together:
                try:
                    self.delete_topic(name)
                except UnknownTopicError as error:
                    outcomes[index] = error
        return outcomes

    def add_partitions(self, name: str, new_assignment: dict[int, tuple[int, ...]]) -> TopicRecord:
        client = self._zk_client()
        topic_path = TopicZNode.path(name)
        with self._zk(f"add partitions to topic {name}"):
            for _ in range(_RETRIES):
                try:
                    data, stat = client.get(topic_path)
                except NoNodeError:
                    raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
                topic_id, assignment = TopicZNode.decode(name, data)
                adding, removing = TopicZNode.decode_reassignment(name, data)
                added = validate_new_partitions(assignment, new_assignment)
                topic_id = topic_id or random_kafka_uuid()
                assignment = {**assignment, **added}
                encoded = TopicZNode.encode(topic_id, assignment, adding, removing)
                try:
                    client.set(topic_path, encoded, version=stat.version)
                except BadVersionError:
                    continue
                except NoNodeError:
                    raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
                break
            else:
                raise RegistryError(f"could not add partitions to {name}: {topic_path} kept changing")
            configs = self._read_configs(client, name)
        self._notify(TOPICS)
        return TopicRecord(name, topic_id, assignment, configs)

    def topics(self) -> dict[str, TopicRecord]:
        client = self._zk_client()
        with self._zk("list the topics"):
            names = sorted(client.get_children(TopicsZNode.path))
            return self._read_topics(client, names, after_round_trip=True)

    def get_topic(self, name: str) -> TopicRecord | None:
        client = self._zk_client()
        with self._zk(f"read topic {name}"):
            return self._read_topics(client, [name]).get(name)

    def _read_topics(
        self, client: KazooClient, names: list[str], *, after_round_trip: bool = False
    ) -> dict[str, TopicRecord]:
        """Topic and config znodes of ``names``, read in one pipelined batch (those not kept under
        their watches: kctl.zk.watched_reads)."""
        if len(self._session.watched_topics):
            self._session.settle_watches(client, after_round_trip=after_round_trip)
        kept, unread = self._session.watched_topics.lookup(names)
        unread_names = [name for name, _ in unread]
        topic_results = [client.get_async(TopicZNode.path(n)) for n in unread_names]
        config_results = [
            client.get_async(ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, n)) for n in unread_names
        ]
        topics = collect(topic_results, self._op_timeout)
        configs = collect(config_results, self._op_timeout)
        records: dict[str, TopicRecord] = {}
        for (name, generation), topic, config in zip(unread, topics, configs, strict=True):
            if topic is None:
                continue  # deleted meanwhile
            data, stat = topic
            try:
                topic_id, assignment = TopicZNode.decode(name, data)
            except ZNodeDecodeError as error:
                log.warning("ignoring a topic kctl cannot read: %s", error)
                continue
            if topic_id is None:
                generation = None  # written now: its watch fires
                topic_id, assignment = self._assign_topic_id(client, name, data, stat)
                if topic_id is None:
                    continue
            overrides = ConfigEntityZNode.decode(ConfigEntityZNode.TOPICS, name, config[0]) if config else {}
            try:
                adding, removing = TopicZNode.decode_reassignment(name, data)
            except ZNodeDecodeError:
                adding, removing = {}, {}
            records[name] = TopicRecord(name, topic_id, assignment, overrides, adding, removing)
            self._session.watched_topics.keep(name, generation, records[name])
        records.update(kept)
        return {name: records[name] for name in names if name in records}

    def _assign_topic_id(
        self, client: KazooClient, name: str, data: bytes, stat: ZnodeStat
    ) -> tuple[uuid.UUID | None, dict[int, tuple[int, ...]]]:
        """Give a topic written without a topic id one (as Kafka's controller does); if another
        process got there first, use its. (None, {}) when the topic went away."""
        path = TopicZNode.path(name)
        for _ in range(_RETRIES):
            topic_id, assignment = TopicZNode.decode(name, data)
            if topic_id is not None:
                return topic_id, assignment
            topic_id = random_kafka_uuid()
            try:
                client.set(path, TopicZNode.encode(topic_id, assignment), version=stat.version)
                log.info("assigned topic id %s to topic %s", encode_uuid(topic_id), name)
                return topic_id, assignment
            except BadVersionError:
                try:
                    data, stat = client.get(path)
                except NoNodeError:
                    return None, {}
            except NoNodeError:
                return None, {}
        raise RegistryError(f"could not assign a topic id to {name}: {path} kept changing")

    @staticmethod
    def _read_configs(client: KazooClient, name: str) -> dict[str, str]:
        try:
            data, _ = client.get(ConfigEntityZNode.path(ConfigEntityZNode.TOPICS, name))
        except NoNodeError:
            return {}
        return ConfigEntityZNode.decode(ConfigEntityZNode.TOPICS, name, data)

    # -- partition state ---------------------------------------------------------------------------
    def set_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        *,
        expected_partition_epoch: int | None = None,
    ) -> PartitionState:
        client = self._zk_client()
        path = TopicPartitionStateZNode.path(topic, partition)
        data = TopicPartitionStateZNode.encode(state)
        where = f"{topic}-{partition}"
        with self._zk(f"write the state of partition {where}"):
            try:
                topic_data, _ = client.get(TopicZNode.path(topic))
            except NoNodeError:
                raise UnknownTopicError(f"Topic '{topic}' does not exist.") from None
            _, assignment = TopicZNode.decode(topic, topic_data)
            if partition not in assignment:
                raise UnknownTopicError(f"Partition {where} does not exist.")
            if expected_partition_epoch is None:
                version = self._write_state(client, topic, partition, data)
            elif expected_partition_epoch < 0:
                try:
                    self._create_state(client, topic, partition, data)
                except NodeExistsError:
                    raise PartitionStateConflictError(f"Partition {where} already has a state") from None
                version = 0
            else:
                try:
                    version = client.set(path, data, version=expected_partition_epoch).version
                except (BadVersionError, NoNodeError):
                    raise PartitionStateConflictError(
                        f"Partition {where} is not at partition epoch {expected_partition_epoch}"
                    ) from None
        self._notify(PARTITIONS)
        return dataclasses.replace(state, partition_epoch=version)

    def alter_partition_states(
        self, updates: list[PartitionStateUpdate]
    ) -> dict[tuple[str, int], PartitionState | RegistryError]:
        client = self._zk_client()
        outcome: dict[tuple[str, int], PartitionState | RegistryError] = {}
        with self._zk(f"write the ISR of {len(updates)} partition(s)"):
            pending = [
                (
                    update,
                    client.set_async(
                        TopicPartitionStateZNode.path(update.topic, update.partition),
                        TopicPartitionStateZNode.encode(update.state),
                        version=update.expected_partition_epoch,
                    ),
                )
                for update in updates
            ]
            for update, result in pending:
                where = f"{update.topic}-{update.partition}"
                key = (update.topic, update.partition)
                try:
                    stat = result.get(timeout=self._op_timeout)
                except BadVersionError:
                    outcome[key] = PartitionStateConflictError(
                        f"Partition {where} is not at partition epoch {update.expected_partition_epoch}"
                    )
                    continue
                except NoNodeError:
                    outcome[key] = UnknownTopicError(f"Partition {where} does not exist.")
                    continue
                state = update.state
                outcome[key] = dataclasses.replace(state, partition_epoch=stat.version)
        if any(isinstance(value, PartitionState) for value in outcome.values()):
            self._notify(PARTITIONS)
        return outcome

    def _write_state(self, client: KazooClient, topic: str, partition: int, data: bytes) -> int:
        path = TopicPartitionStateZNode.path(topic, partition)
        for _ in range(_RETRIES):
            try:
                return client.set(path, data).version
            except NoNodeError:
                pass
            try:
                self._create_state(client, topic, partition, data)
                return 0
            except NodeExistsError:
                continue
        raise RegistryError(f"could not write {path}: it kept appearing and disappearing")

    @staticmethod
    def _create_state(client: KazooClient, topic: str, partition: int, data: bytes) -> None:
        """Create the state znode and its parents, but never the topic znode itself (which
        ``makepath`` would resurrect, empty, under a concurrent delete)."""
        for parent in (TopicPartitionsZNode.path(topic), TopicPartitionZNode.path(topic, partition)):
            try:
                client.create(parent)
            except NodeExistsError:
                pass
            except NoNodeError:
                raise UnknownTopicError(f"Topic '{topic}' does not exist.") from None
        try:
            client.create(TopicPartitionStateZNode.path(topic, partition), data)
        except NoNodeError:
            raise UnknownTopicError(f"Topic '{topic}' does not exist.") from None

    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        client = self._zk_client()
        with self._zk(f"read the partition states of {topic}"):
            try:
                topic_data, _ = client.get(TopicZNode.path(topic))
            except NoNodeError:
                raise UnknownTopicError(f"Topic '{topic}' does not exist.") from None
            _, assignment = TopicZNode.decode(topic, topic_data)
            partitions = sorted(assignment)
            results = collect(
                [client.get_async(TopicPartitionStateZNode.path(topic, p)) for p in partitions],
                self._op_timeout,
            )
        states: dict[int, PartitionState] = {}
        for partition, result in zip(partitions, results, strict=True):
            if result is None:
                continue  # no state yet
            data, stat = result
            try:
                states[partition] = TopicPartitionStateZNode.decode(topic, partition, data, stat.version)
            except ZNodeDecodeError as error:
                log.warning("ignoring a partition state kctl cannot read: %s", error)
        return states

    def partition_states_of(
        self, topics: Mapping[str, TopicRecord], deleted: set[str] | None = None
    ) -> dict[tuple[str, int], PartitionState]:
        client = self._zk_client()
        wanted = [(name, p) for name, record in topics.items() for p in sorted(record.assignment)]
        with self._zk(f"read the partition states of {len(topics)} topics"):
            if len(self._session.watched_states):
                self._session.settle_watches(client)
            kept, unread = self._session.watched_states.lookup(wanted)  # kctl.zk.watched_reads
            results = collect(
                [client.get_async(TopicPartitionStateZNode.path(name, p)) for (name, p), _ in unread],
                self._op_timeout,
            )
            if deleted is not None:  # in the same pipeline: which topics are gone since the listing
                # (a topic kept under its watch is not: its deletion would have fired the watch)
                _, unkept = self._session.watched_topics.lookup(topics)
                names = [name for name, _ in unkept]
                gone = [client.exists_async(TopicZNode.path(name)) for name in names]
                for name, result in zip(names, gone, strict=True):
                    if result.get(timeout=self._op_timeout) is None:
                        deleted.add(name)
        read: dict[tuple[str, int], PartitionState | None] = {}
        for (key, generation), result in zip(unread, results, strict=True):
            state = None  # no state yet (or the topic was deleted meanwhile)
            if result is not None:
                data, stat = result
                try:
                    state = TopicPartitionStateZNode.decode(*key, data, stat.version)
                except ZNodeDecodeError as error:
                    log.warning("ignoring a partition state kctl cannot read: %s", error)
                    continue
            read[key] = state
            self._session.watched_states.keep(key, generation, state)
        states: dict[tuple[str, int], PartitionState] = {}
        for key in wanted:
            state = kept[key] if key in kept else read.get(key)
            if state is not None:
                states[key] = state
        return states

    # -- fenced controller writes ------------------------------------------------------------------
    def _fenced_commit(self, client: KazooClient, fence: ControllerFence, ops: list[Any]) -> list[Any]:
        """Commit ``ops`` (functions adding operations to a transaction) behind a check of
        /controller_epoch's version. Raises ControllerMovedError when that check fails; returns
        the results of ``ops`` otherwise (some may be exceptions: the caller decides)."""
        transaction = client.transaction()
        transaction.check(ControllerEpochZNode.path, fence.epoch_zk_version)
        for op in ops:
            op(transaction)
        results = transaction.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            self._fence = None if self._fence == fence else self._fence
            raise ControllerMovedError(
                f"controller epoch {fence.epoch} is no longer current (/controller_epoch moved on "
                f"from version {fence.epoch_zk_version}): another broker is the controller"
            )
        return results[1:]

    def set_partition_states(
        self, updates: list[PartitionStateUpdate], fence: ControllerFence
    ) -> dict[tuple[str, int], PartitionState]:
        if not updates:
            return {}
        client = self._zk_client()
        with self._zk(f"write {len(updates)} partition state(s)"):
            # the parents of new states, pipelined (ZooKeeper runs one session's requests in order,
            # so /partitions is there before its children): one round trip, not two per partition
            parents: dict[str, str] = {}
            for update in updates:
                if update.expected_partition_epoch < 0:
                    parents.setdefault(TopicPartitionsZNode.path(update.topic), update.topic)
                    parents[TopicPartitionZNode.path(update.topic, update.partition)] = update.topic
            creations = [(topic, client.create_async(path)) for path, topic in parents.items()]
            for topic, creation in creations:
                try:
                    creation.get(timeout=self._op_timeout)
                except NodeExistsError:
                    pass
                except NoNodeError:
                    raise UnknownTopicError(f"Topic '{topic}' does not exist.") from None
            ops: list[Any] = []
            for update in updates:
                path = TopicPartitionStateZNode.path(update.topic, update.partition)
                data = TopicPartitionStateZNode.encode(update.state)
                if update.expected_partition_epoch < 0:
                    ops.append(lambda t, path=path, data=data: t.create(path, data))
                else:
                    ops.append(
                        lambda t, path=path, data=data, v=update.expected_partition_epoch: t.set_data(
                            path, data, version=v
                        )
                    )
            results = self._fenced_commit(client, fence, ops)
        failed = [(u, r) for u, r in zip(updates, results, strict=True) if isinstance(r, Exception)]
        # the op that failed; the others report being rolled back (before it) or not run (after it)
        real = [(u, r) for u, r in failed if not isinstance(r, (RolledBackError, RuntimeInconsistency))]
        if real:
            update, error = real[0]
            where = f"{update.topic}-{update.partition}"
            if isinstance(error, NoNodeError) and update.expected_partition_epoch < 0:
                raise UnknownTopicError(f"Partition {where} does not exist.")
            raise PartitionStateConflictError(
                f"Partition {where} is not at partition epoch {update.expected_partition_epoch} "
                f"({type(error).__name__})"
            )
        stored: dict[tuple[str, int], PartitionState] = {}
        for update, result in zip(updates, results, strict=True):
            version = 0 if update.expected_partition_epoch < 0 else result.version
            state = update.state
            stored[(update.topic, update.partition)] = dataclasses.replace(state, partition_epoch=version)
        self._notify(PARTITIONS)
        return stored

    def set_topic_assignment(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        adding_replicas: dict[int, tuple[int, ...]],
        removing_replicas: dict[int, tuple[int, ...]],
        fence: ControllerFence,
    ) -> TopicRecord:
        client = self._zk_client()
        path = TopicZNode.path(name)
        with self._zk(f"reassign replicas of topic {name}"):
            for _ in range(_RETRIES):
                try:
                    data, stat = client.get(path)
                except NoNodeError:
                    raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
                topic_id, current = TopicZNode.decode(name, data)
                if sorted(current) != sorted(assignment):
                    raise RegistryError(f"{name}: a reassignment cannot change the partitions")
                topic_id = topic_id or random_kafka_uuid()
                encoded = TopicZNode.encode(topic_id, assignment, adding_replicas, removing_replicas)
                (result,) = self._fenced_commit(
                    client, fence, [lambda t, e=encoded, v=stat.version: t.set_data(path, e, version=v)]
                )
                if isinstance(result, NoNodeError):
                    raise UnknownTopicError(f"Topic '{name}' does not exist.")
                if not isinstance(result, Exception):
                    break
            else:
                raise RegistryError(f"could not reassign {name}: {path} kept changing")
            configs = self._read_configs(client, name)
        self._notify(TOPICS)
        return TopicRecord(name, topic_id, assignment, configs, adding_replicas, removing_replicas)


MAX_MULTI_OPS = 1000
"""Deletions per ZooKeeper multi-op: a request stays far below ZooKeeper's 1 MB ``jute.maxbuffer``
(a multi-op of 25,000 deletions is refused and the connection dropped). A DeleteTopics of thousands
of partitions goes in several; a topic of more znodes than this is deleted znode by znode."""


def _chunks(names: list[str], doomed: Mapping[str, list[str] | None]) -> list[list[str]]:
    """``names`` in order (each with at most MAX_MULTI_OPS znodes), grouped so that no group deletes
    more than MAX_MULTI_OPS znodes."""
    chunks: list[list[str]] = []
    size = 0
    for name in names:
        count = len(doomed[name] or ())
        if not chunks or size + count > MAX_MULTI_OPS:
            chunks.append([])
            size = 0
        chunks[-1].append(name)
        size += count
    return chunks


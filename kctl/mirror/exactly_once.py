"""`kctl mirror --exactly-once`: one source copied into the target in transactions, with the source
positions stored in the TARGET inside the same transactions (as MirrorMaker 2's exactly-once source
connectors do through Connect's offsets topic).

``ExactlyOnceCopier`` reads the source with a read_committed ``kctl.client.Consumer`` (aborted source
transactions are not copied) and writes with a transactional ``kctl.client.Producer`` on the target
(``transactional.id`` ``kctl-mirror-<group>-<source alias>``, so a restarted mirror fences the one it
replaces). Each transaction holds a batch of copied records and, for every partition it advanced, a
record of ``POSITIONS_TOPIC`` on the target (compacted, one partition): key
``<source alias>\\0<topic>\\0<partition>``, value the next source offset (decimal). On start the
positions are read back from the target with read_committed, the last value of each key winning;
partitions without one start at the log start (or the end with ``start="end"``). So whenever the
mirror dies (``kill -9`` included), the positions and the records it committed agree, and what it
had not committed is aborted (by the coordinator's timeout or the next mirror's init_transactions)
and copied again: every source record is in the target exactly once for read_committed consumers.

The target topics are kept in line with the sources' by the mirror itself (``kctl.mirror.topics``,
through ``_SourceRun.refresh_topics``); partitions whose target has another partition count are
written by key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kctl.client import KafkaError, NewTopic, Producer, TopicPartition
from kctl.client.consumer import Consumer, ConsumerConfig
from kctl.mirror.forwarder import MirrorError, producer_properties

if TYPE_CHECKING:
    from kctl.mirror.mirror import _SourceRun

__all__ = ["POSITIONS_TOPIC", "ExactlyOnceCopier", "read_positions"]

log = logging.getLogger(__name__)

POSITIONS_TOPIC = "kctl-mirror-positions.internal"
MAX_RECORDS_PER_TRANSACTION = 2000


def consumer_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The consumer properties among a cluster's client properties."""
    known = ConsumerConfig.known_keys()
    return {k: v for k, v in properties.items() if k in known}


def position_key(alias: str, tp: TopicPartition) -> bytes:
    return f"{alias}\0{tp.topic}\0{tp.partition}".encode()


def read_positions(
    bootstrap: str, properties: Mapping[str, str], alias: str, timeout: float = 60.0
) -> dict[TopicPartition, int]:
    """The committed source positions of ``alias`` stored in the target (read_committed, up to the
    last stable offset of ``POSITIONS_TOPIC``)."""
    config = ConsumerConfig.coerce(consumer_properties(properties), isolation_level="read_committed")
    positions: dict[TopicPartition, int] = {}
    tp = TopicPartition(POSITIONS_TOPIC, 0)
    with Consumer(bootstrap, config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, consumer.beginning_offsets([tp])[tp])
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise MirrorError(f"reading {POSITIONS_TOPIC} on the target did not reach offset {end}")
            for record in consumer.poll(0.5):
                if record.key is None or record.value is None:
                    continue
                source, topic, partition = record.key.decode().split("\0")
                if source == alias:
                    positions[TopicPartition(topic, int(partition))] = int(record.value)
    return positions


class ExactlyOnceCopier:
    """The exactly-once loop of one ``_SourceRun`` (on its thread)."""

    def __init__(self, run: _SourceRun) -> None:
        self.run = run
        mirror = run.mirror
        self.alias = run.spec.alias
        target = mirror.spec.target
        self._ensure_positions_topic()
        self.positions = read_positions(target.bootstrap_servers, target.properties, self.alias)
        source_config = ConsumerConfig.coerce(
            consumer_properties(run.spec.properties),
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        self.consumer = Consumer(run.spec.bootstrap_servers, source_config)
        properties = producer_properties(target.properties) | {
            "transactional.id": f"kctl-mirror-{mirror.spec.group_id}-{self.alias}",
            "linger.ms": "5",
        }
        self.producer = Producer(target.bootstrap_servers, properties)
        self.producer.init_transactions(60.0)
        self.assigned: dict[TopicPartition, tuple[str, bool]] = {}  # target topic, one to one
        self.stop_at: dict[TopicPartition, int] = {}

    def _ensure_positions_topic(self) -> None:
        mirror = self.run.mirror
        if POSITIONS_TOPIC in mirror.target_topics():
            return
        (result,) = mirror.target_admin.create_topics(
            [NewTopic(POSITIONS_TOPIC, 1, mirror.spec.replication_factor, {"cleanup.policy": "compact"})]
        )
        if not result.ok and result.error != "TOPIC_ALREADY_EXISTS":
            raise MirrorError(f"target {mirror.spec.target.alias}: topic {POSITIONS_TOPIC}: {result.error}")
        mirror.target_admin.cluster.wait_for_topics([POSITIONS_TOPIC])

    def assign(self) -> None:
        """Follow the mirror's topic actions: new partitions start at their stored position."""
        fresh = []
        for action in self.run.actions.values():
            for p in range(action.source_partitions):
                tp = TopicPartition(action.source_topic, p)
                if tp not in self.assigned:
                    self.assigned[tp] = (action.target_topic, action.one_to_one)
                    fresh.append(tp)
        if not fresh:
            return
        self.consumer.assign(list(self.assigned))
        earliest = self.consumer.beginning_offsets(fresh)
        latest = self.consumer.end_offsets(fresh)
        for tp in fresh:
            position = self.positions.get(tp)
            if position is None:
                position = latest[tp] if self.run.mirror.spec.start == "end" else earliest[tp]
            position = max(position, earliest[tp])
            self.positions[tp] = position
            self.consumer.seek(tp, position)
            if self.run.mirror.spec.once:
                self.stop_at[tp] = latest[tp]

    def done(self) -> bool:
        """``once``: every partition read to the end offsets seen at the start. The consumer's
        position, not the stored one: a source ending in markers or aborted records has nothing to
        copy there (the consumer steps over them; a restart would read them again, copying nothing)."""
        return all(self.consumer.position(tp) >= end for tp, end in self.stop_at.items())

    def copy_once(self) -> int:
        """One transaction: the records one poll returned and the positions they advance to."""
        records = self.consumer.poll(0.5, max_records=MAX_RECORDS_PER_TRANSACTION)
        if not records:
            return 0
        producer = self.producer
        advanced: dict[TopicPartition, int] = {}
        producer.begin_transaction()
        try:
            for record in records:
                tp = TopicPartition(record.topic, record.partition)
                target_topic, one_to_one = self.assigned[tp]
                producer.send(
                    target_topic,
                    record.value,
                    record.key,
                    record.headers or None,
                    record.partition if one_to_one else None,
                    record.timestamp,
                )
                advanced[tp] = record.offset + 1
            for tp, offset in advanced.items():
                producer.send(
                    POSITIONS_TOPIC, str(offset).encode(), position_key(self.alias, tp), partition=0
                )
            producer.commit_transaction(60.0)
        except KafkaError as error:
            log.warning("%s: transaction failed (%s); aborting and reading again", self.alias, error)
            try:
                producer.abort_transaction(60.0)
            except KafkaError as abort_error:
                raise MirrorError(
                    f"{self.alias}: the transaction could not be aborted: {abort_error}"
                ) from None
            for tp in advanced:
                self.consumer.seek(tp, self.positions[tp])
            return 0
        self.positions.update(advanced)
        return len(records)

    def loop(self) -> None:
        run = self.run
        spec = run.mirror.spec
        self.assign()
        last_refresh = time.monotonic()
        while not run.mirror._stop.is_set():
            if spec.once and self.done():
                break
            self.copy_once()
            if not spec.once and time.monotonic() - last_refresh >= spec.refresh_interval:
                run.refresh_topics()
                self.assign()
                last_refresh = time.monotonic()

    def close(self) -> None:
        for client in (self.consumer, self.producer):
            try:
                client.close()
            except Exception:
                log.debug("closing a client of %s failed", self.alias, exc_info=True)

"""The mirror maker: one or more source clusters copied into one target cluster, continuously (or,
with ``once``, up to the end offsets seen at the start), as one plain process.

``Mirror(spec).run()`` connects to every cluster, keeps the target's topics in line with the
sources' (``kctl.mirror.topics``: created with the source's partition count and configs, grown,
picked up as they appear, every ``refresh_interval``), and runs one ``Forwarder`` per source: its
produce worker on the source's own thread (which also commits and refreshes), its fetch worker on a
second thread, a bounded queue per partition between them (``kctl.mirror.forwarder``: batches
forwarded without decoding, idempotent, ``acks=-1``).

Where the mirror keeps its positions: a consumer group on each **source** cluster,
``kctl-mirror-<target alias>`` by default (``MirrorSpec.group``), committed (OffsetCommit without
members) every ``commit_interval`` and at a stop, and only up to what the target acknowledged, after
the offset syncs that cover it were acknowledged too. A restart (or a ``kill -9``) resumes from
there: nothing is lost, and what is written twice is what was in flight since the last commit.
Partitions without a committed position start at the log start (``start="beginning"``) or at the
log end (``"end"``).

With ``exactly_once`` each source is copied in transactions instead, its positions stored in the
target inside them (``kctl.mirror.exactly_once``): a killed mirror leaves every record exactly once.

With ``sync_group_offsets``, the consumer groups of each source are translated onto the target every
``refresh_interval`` (``kctl.mirror.groups``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kctl.client import (
    AdminClient,
    ClientConfig,
    ClusterClient,
    GroupAdmin,
    KafkaError,
    NewTopic,
    Producer,
    TopicDescription,
    TopicPartition,
)
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.mirror.forwarder import Forwarder, MirrorError, PartitionState, producer_properties
from kctl.mirror.groups import GroupTranslation, translate_groups
from kctl.mirror.offset_syncs import (
    OFFSET_SYNCS_TOPIC,
    OffsetSync,
    OffsetSyncStore,
    encode_sync,
    read_offset_syncs,
)
from kctl.mirror.topics import TopicAction, TopicPolicy, apply_topic_actions, plan_topics, source_configs

__all__ = ["ClusterSpec", "Mirror", "MirrorSpec", "PartitionStatus", "default_group"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster the mirror talks to: its alias (the clusters file name, or given), its bootstrap
    servers and its client properties."""

    alias: str
    bootstrap_servers: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def client_config(self) -> ClientConfig:
        known = ClientConfig.known_keys()
        return ClientConfig.from_properties({k: v for k, v in self.properties.items() if k in known})


def default_group(target_alias: str) -> str:
    return f"kctl-mirror-{target_alias}"


@dataclass(frozen=True)
class MirrorSpec:
    """Everything a mirror run needs (the CLI's options)."""

    sources: Sequence[ClusterSpec]
    target: ClusterSpec
    policy: TopicPolicy = field(default_factory=TopicPolicy)
    group: str | None = None
    once: bool = False
    start: str = "beginning"
    replication_factor: int = -1
    refresh_interval: float = 5.0
    commit_interval: float = 1.0
    sync_group_offsets: bool = False
    groups_pattern: str = ".*"
    exactly_once: bool = False
    """Copy in transactions, the source positions stored in the target with them
    (``kctl.mirror.exactly_once``) instead of the source group's commits."""

    @property
    def group_id(self) -> str:
        return self.group or default_group(self.target.alias)


@dataclass(frozen=True)
class PartitionStatus:
    """One partition's progress, as status lines and the summary show it."""

    source: str
    topic: str
    partition: int
    target_topic: str
    position: int
    acked: int
    high_watermark: int
    lag: int
    records: int
    bytes: int


class _SourceRun:
    """One source: its clients, its forwarder, its topics and its commits (runs on its own thread)."""

    def __init__(self, mirror: Mirror, source: ClusterSpec) -> None:
        self.mirror = mirror
        self.spec = source
        spec = mirror.spec
        config = source.client_config()
        self.source = ClusterClient(source.bootstrap_servers, config)
        self.admin = AdminClient(source.bootstrap_servers, config)
        self.groups = GroupAdmin(self.admin)
        self.target = ClusterClient(spec.target.bootstrap_servers, spec.target.client_config())
        self.forwarder = Forwarder(
            source.alias,
            self.source,
            self.target,
            spec.target.alias,
            target_properties=spec.target.properties,
            target_bootstrap=spec.target.bootstrap_servers,
            on_sync=mirror._write_sync,
        )
        self.actions: dict[str, TopicAction] = {}
        self.skipped: dict[str, str] = {}
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        self._last_commit = 0.0
        self._last_refresh = 0.0
        self._committed: dict[TopicPartition, int] = {}

    def close(self) -> None:
        self.forwarder.close()
        for client in (self.admin, self.source, self.target):
            try:
                client.close()
            except Exception:  # closing must not hide the error that ended the run
                log.debug("closing a client of %s failed", self.spec.alias, exc_info=True)

    # -------------------------------------------------------------------------------- topics

    def plan(self) -> tuple[list[TopicAction], dict[str, str]]:
        try:
            sources = self.admin.list_topics(include_internal=True)
        except KafkaError as error:
            raise MirrorError(f"source {self.spec.alias} ({self.spec.bootstrap_servers}): {error}") from None
        wanted = [
            t
            for t in sources
            if self.mirror.spec.policy.reason_to_skip(t.name, self.mirror.spec.target.alias) is None
        ]
        try:
            configs = source_configs(self.admin, [t.name for t in wanted]) if wanted else {}
        except KafkaError:
            configs = {}
        targets = self.mirror.target_topics()
        return plan_topics(
            sources, targets, self.mirror.spec.policy, self.spec.alias, self.mirror.spec.target.alias, configs
        )

    def refresh_topics(self, *, apply: bool = True) -> None:
        actions, skipped = self.plan()
        self.skipped = skipped
        if apply:
            for action, error in apply_topic_actions(
                self.mirror.target_admin, actions, replication_factor=self.mirror.spec.replication_factor
            ):
                if error is not None:
                    raise MirrorError(
                        f"target {self.mirror.spec.target.alias}: topic {action.target_topic} "
                        f"(from {self.spec.alias} {action.source_topic}): {error}"
                    )
            if any(a.action in ("create", "add-partitions") for a in actions):
                self.target.mark_stale()
                self.target.wait_for_topics([a.target_topic for a in actions])
        new = [a for a in actions if a.source_topic not in self.actions or self.actions[a.source_topic] != a]
        for action in actions:
            self.actions[action.source_topic] = action
        self._assign(new)
        self._last_refresh = time.monotonic()

    def _assign(self, actions: list[TopicAction]) -> None:
        fresh: list[TopicPartition] = []
        for action in actions:
            for p in range(action.source_partitions):
                tp = TopicPartition(action.source_topic, p)
                state = self.forwarder.partitions.get(tp)
                if state is not None:
                    state.keyed = not action.one_to_one
                    continue
                fresh.append(tp)
        if not fresh:
            return
        committed = self.groups.committed_offsets(self.mirror.spec.group_id, fresh)
        earliest = self.admin.list_offsets(fresh, "earliest")
        latest = self.admin.list_offsets(fresh, "latest")
        for tp in fresh:
            action = self.actions[tp.topic]
            start = earliest[tp].offset if earliest[tp].ok else 0
            end = latest[tp].offset if latest[tp].ok else start
            value = committed.get(tp)
            if value is not None and value.offset >= 0:
                position = value.offset
                if position < start:
                    log.warning(
                        "%s %s: committed offset %d was deleted; from %d",
                        self.spec.alias,
                        tp,
                        position,
                        start,
                    )
                    position = start
            else:
                position = end if self.mirror.spec.start == "end" else start
            target_partition = tp.partition if action.one_to_one else -1
            state = PartitionState(
                tp,
                TopicPartition(action.target_topic, target_partition),
                position,
                position,
                committed=value.offset if value is not None else -1,
                stop_at=end if self.mirror.spec.once else None,
                keyed=not action.one_to_one,
                high_watermark=end,
            )
            self._committed[tp] = state.committed
            self.forwarder.add_partition(state)

    # -------------------------------------------------------------------------------- commits

    def commit(self) -> None:
        """Commit the acknowledged positions that moved, once the syncs covering them are written."""
        changed = {
            tp: s.acked
            for tp, s in self.forwarder.partitions.items()
            if s.acked != self._committed.get(tp, -1)
        }
        self._last_commit = time.monotonic()
        if not changed:
            return
        self.mirror._flush_syncs()
        codes = self.groups.alter_offsets(
            self.mirror.spec.group_id, {tp: OffsetAndMetadata(offset) for tp, offset in changed.items()}
        )
        for tp, code in codes.items():
            if code == 0:
                self._committed[tp] = changed[tp]
                self.forwarder.partitions[tp].committed = changed[tp]
            else:
                log.warning("%s: committing %s failed (error %d); retried later", self.spec.alias, tp, code)

    # -------------------------------------------------------------------------------- the loop

    def run(self) -> None:
        try:
            self._run()
        except BaseException as error:  # reported by Mirror.run
            self.error = error
            self.mirror._stop.set()

    def _run(self) -> None:
        mirror = self.mirror
        spec = mirror.spec
        if spec.exactly_once:
            from kctl.mirror.exactly_once import ExactlyOnceCopier

            copier = ExactlyOnceCopier(self)
            try:
                copier.loop()
            finally:
                copier.close()
            return
        self.forwarder.init_producer_id()
        self.forwarder.start()  # the fetch worker; this thread is the produce worker
        try:
            while not mirror._stop.is_set():
                self.forwarder.run_once()
                now = time.monotonic()
                if now - self._last_commit >= spec.commit_interval:
                    self.commit()
                if not spec.once and now - self._last_refresh >= spec.refresh_interval:
                    self.refresh_topics()
                    if spec.sync_group_offsets:
                        mirror.sync_groups(self)
                if spec.once and all(s.done for s in list(self.forwarder.partitions.values())):
                    break
        finally:
            self.forwarder.stop_fetching()
        self.forwarder.drain(30.0)
        self.commit()

    def statuses(self) -> list[PartitionStatus]:
        return [
            PartitionStatus(
                self.spec.alias,
                tp.topic,
                tp.partition,
                s.target.topic,
                s.position,
                s.acked,
                s.high_watermark,
                s.lag,
                s.records,
                s.bytes,
            )
            for tp, s in sorted(self.forwarder.partitions.items())
        ]


class Mirror:
    """A mirror run (see the module docstring). ``stop()`` (e.g. from a signal handler) ends it
    cleanly: what is in flight is acknowledged and the positions are committed."""

    def __init__(self, spec: MirrorSpec) -> None:
        if not spec.sources:
            raise ValueError("a mirror needs at least one source")
        self.spec = spec
        self._stop = threading.Event()
        self._sync_lock = threading.Lock()
        self._sync_producer: Producer | None = None
        self._sync_futures: list[Any] = []
        self.target_admin = AdminClient(spec.target.bootstrap_servers, spec.target.client_config())
        self.runs: list[_SourceRun] = []
        self.syncs = OffsetSyncStore()

    def stop(self) -> None:
        self._stop.set()

    def target_topics(self) -> dict[str, TopicDescription]:
        try:
            return {t.name: t for t in self.target_admin.list_topics(include_internal=True)}
        except KafkaError as error:
            raise MirrorError(
                f"target {self.spec.target.alias} ({self.spec.target.bootstrap_servers}): {error}"
            ) from None

    # -------------------------------------------------------------------------------- offset syncs

    def _ensure_syncs_topic(self) -> None:
        if OFFSET_SYNCS_TOPIC in self.target_topics():
            return
        (result,) = self.target_admin.create_topics(
            [NewTopic(OFFSET_SYNCS_TOPIC, 1, self.spec.replication_factor, {"cleanup.policy": "delete"})]
        )
        if not result.ok and result.error != "TOPIC_ALREADY_EXISTS":
            raise MirrorError(f"target {self.spec.target.alias}: topic {OFFSET_SYNCS_TOPIC}: {result.error}")
        self.target_admin.cluster.wait_for_topics([OFFSET_SYNCS_TOPIC])

    def _write_sync(self, sync: OffsetSync) -> None:
        with self._sync_lock:
            if self._sync_producer is None:
                config = producer_properties(self.spec.target.properties) | {"linger.ms": "0"}
                self._sync_producer = Producer(self.spec.target.bootstrap_servers, config)
            key, value = encode_sync(sync)
            self._sync_futures.append(self._sync_producer.send(OFFSET_SYNCS_TOPIC, value, key, partition=0))
            self.syncs.add(sync)

    def _flush_syncs(self) -> None:
        with self._sync_lock:
            producer, futures, self._sync_futures = self._sync_producer, self._sync_futures, []
        if producer is None or not futures:
            return
        producer.flush()
        for future in futures:
            error = future.exception(0)
            if error is not None:
                raise MirrorError(f"target {self.spec.target.alias}: topic {OFFSET_SYNCS_TOPIC}: {error}")

    # -------------------------------------------------------------------------------- groups

    def sync_groups(self, run: _SourceRun) -> list[GroupTranslation]:
        """Translate the source's consumer groups onto the target (``sync_group_offsets``)."""
        mirrored = {tp: s.committed for tp, s in run.forwarder.partitions.items() if s.committed >= 0}
        with self._sync_lock:
            store = OffsetSyncStore(
                s
                for key in {(run.spec.alias, tp.topic, tp.partition) for tp in mirrored}
                for s in self.syncs.syncs(*key)
            )
        try:
            return translate_groups(
                run.groups,
                GroupAdmin(self.target_admin),
                store,
                run.spec.alias,
                mirrored,
                exclude={self.spec.group_id},
                pattern=self.spec.groups_pattern,
                execute=True,
            )
        except KafkaError as error:
            log.warning("syncing group offsets from %s failed: %s", run.spec.alias, error)
            return []

    # -------------------------------------------------------------------------------- running

    def prepare(self, *, apply: bool = True) -> None:
        """Connect, check every cluster answers, plan (and with ``apply`` create) the target topics,
        assign the partitions. Raises MirrorError naming the cluster that fails."""
        self.target_topics()
        for source in self.spec.sources:
            run = _SourceRun(self, source)
            self.runs.append(run)
            run.refresh_topics(apply=apply)
        if apply:
            self._ensure_syncs_topic()
            if self.spec.sync_group_offsets:
                loaded = read_offset_syncs(self.spec.target.bootstrap_servers, self.spec.target.properties)
                for run in self.runs:
                    for tp in run.forwarder.partitions:
                        for sync in loaded.syncs(run.spec.alias, tp.topic, tp.partition):
                            self.syncs.add(sync)

    def run(
        self, on_status: Callable[[list[PartitionStatus]], None] | None = None, status_interval: float = 5.0
    ) -> None:
        """Mirror until ``stop()`` (or, with ``once``, until caught up); raises the first source's
        error (MirrorError naming the cluster and topic) after the others stopped."""
        if not self.runs:
            self.prepare()
        for run in self.runs:
            run.thread = threading.Thread(target=run.run, name=f"kctl-mirror-{run.spec.alias}", daemon=True)
            run.thread.start()
        last = time.monotonic()
        try:
            while any(r.thread is not None and r.thread.is_alive() for r in self.runs):
                for run in self.runs:
                    assert run.thread is not None
                    run.thread.join(timeout=0.2)
                if on_status is not None and time.monotonic() - last >= status_interval:
                    last = time.monotonic()
                    on_status(self.statuses())
        finally:
            self._stop.set()
            for run in self.runs:
                if run.thread is not None:
                    run.thread.join(timeout=60)
        for run in self.runs:
            if run.error is not None:
                raise run.error

    def statuses(self) -> list[PartitionStatus]:
        return [s for run in self.runs for s in run.statuses()]

    def close(self) -> None:
        for run in self.runs:
            run.close()
        if self._sync_producer is not None:
            self._sync_producer.close(10)
        self.target_admin.close()

"""What the replica manager's last metadata sync applied, so that the next one skips what did not
change.

A sync runs after every metadata refresh and looked at every hosted partition: at 10,000
partitions one refresh held the broker's event loop for 0.3-0.5 s, and a failover brings a
refresh per batch of the controller's writes (21 at 10,000 partitions), while a CreateTopics
anywhere in the cluster stalled every broker. Two things made it slow: each topic's log config was
rebuilt and pushed to the log manager (which walked every log for each topic), and each partition
went through the whole leader/follower logic again.

The registry hands out immutable records (``TopicRecord``, ``PartitionState``: a change is a new
object; ZooKeeper's kept reads return the same object while the znode is unchanged), so what a
sync applied is remembered by identity:

- ``topic_config``: a topic's ``LogConfig``, rebuilt only for a new record or new broker defaults,
  and given to the logs only when it differs;
- ``settled``: whether a partition's record and state are the objects the last sync applied to
  it, and nothing of its own moved either (it has that leader and leader epoch, and a follower is
  fetching): the replica manager skips such a partition. ``forget`` drops everything when the
  broker leads again after a fence (a partition taken offline is no longer hosted, so it is never
  skipped).

Event loop only, like the replica manager."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kctl.log.config import LogConfig
from kctl.zk.model import PartitionState, TopicRecord

if TYPE_CHECKING:
    from kctl.broker.partition import Partition
    from kctl.broker.replication.fetcher import ReplicaFetcherManager

__all__ = ["AppliedMetadata"]

Key = tuple[str, int]


class AppliedMetadata:
    """The records and states the last sync applied, and each topic's log config."""

    def __init__(self) -> None:
        self._defaults: LogConfig | None = None
        self._configs: dict[str, tuple[TopicRecord, LogConfig]] = {}
        self._states: dict[Key, tuple[TopicRecord, PartitionState | None]] = {}

    def topic_config(
        self, record: TopicRecord, defaults: LogConfig, give: Callable[[str, LogConfig], None]
    ) -> LogConfig:
        """``record``'s log config over ``defaults``; ``give(name, config)`` is called when it is
        new or changed (the logs of the topic take it)."""
        if defaults is not self._defaults:
            self._defaults = defaults
            self._configs.clear()
        name = record.name
        known = self._configs.get(name)
        if known is not None and known[0] is record:
            return known[1]
        config = defaults.with_overrides(record.configs)
        if known is None or known[1] != config:
            give(name, config)
        self._configs[name] = (record, config)
        return config

    def settled(
        self,
        key: Key,
        record: TopicRecord,
        state: PartitionState | None,
        partition: Partition,
        fetchers: ReplicaFetcherManager | None,
    ) -> bool:
        """Whether a sync has nothing to do for ``partition``: the last sync applied this very
        record and state to it, it still has that leader and leader epoch, and as a follower of a
        live leader it is fetching (a fetcher that could not start is tried again)."""
        applied = self._states.get(key)
        if applied is None or applied[0] is not record or applied[1] is not state or state is None:
            return False
        if partition.leader_id != state.leader or partition.leader_epoch != state.leader_epoch:
            return False
        if state.leader == partition.broker_id or state.leader < 0 or fetchers is None:
            return True
        return fetchers.fetching(partition.topic_partition) is not None

    def applied(self, key: Key, record: TopicRecord, state: PartitionState | None) -> None:
        self._states[key] = (record, state)

    def drop(self, key: Key) -> None:
        self._states.pop(key, None)

    def retain(self, topics: dict[str, TopicRecord]) -> None:
        """Forget the topics that are gone."""
        for name in [name for name in self._configs if name not in topics]:
            del self._configs[name]
        for key in [key for key in self._states if key[0] not in topics]:
            del self._states[key]

    def forget(self) -> None:
        """The next sync applies every partition again."""
        self._states.clear()

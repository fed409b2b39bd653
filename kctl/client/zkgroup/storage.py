"""Where a ZooKeeper-mode group keeps its offsets: ``offsets.storage=zookeeper`` (the persistent
``/consumers/<group>/offsets/<topic>/<partition>`` znodes) or ``kafka`` (the group coordinator's
store, through OffsetCommit/OffsetFetch with generation -1, as an admin tool commits: the
coordinator knows no members of a ZooKeeper-coordinated group). With ``dual.commit.enabled`` every
commit goes to both and a partition starts at the larger of the two committed offsets, which is
what makes seed 003's migration (and its roll-back) neither skip nor re-read records during the
rolling bounces, whichever configuration the partition's previous owner ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kctl.client.cluster import ClusterClient
from kctl.client.errors import BrokerResponseError
from kctl.client.group.admin import GroupAdmin
from kctl.client.zkgroup.config import KAFKA, ZOOKEEPER
from kctl.common.topic_partition import TopicPartition
from kctl.zk.consumer_registry import ConsumerGroupStore

__all__ = ["OffsetStore"]


class OffsetStore:
    """The committed offsets of ``group`` in ``stores`` (a subset of zookeeper, kafka)."""

    def __init__(
        self, group: str, stores: Iterable[str], zk: ConsumerGroupStore, cluster: ClusterClient
    ) -> None:
        self.group = group
        self.stores = tuple(stores)
        self.zk = zk
        self.cluster = cluster
        self._admin: GroupAdmin | None = None

    @property
    def admin(self) -> GroupAdmin:
        if self._admin is None:
            self._admin = GroupAdmin(self.cluster)
        return self._admin

    def fetch(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The committed offset of each partition that has one: the largest over the stores."""
        wanted = sorted(set(partitions))
        found: dict[TopicPartition, int] = {}
        if not wanted:
            return found
        if ZOOKEEPER in self.stores:
            for tp in wanted:
                offset = self.zk.committed_offset(self.group, tp.topic, tp.partition)
                if offset is not None:
                    found[tp] = offset
        if KAFKA in self.stores:
            for tp, value in self.admin.committed_offsets(self.group, wanted).items():
                if value is not None and value.offset >= 0:
                    found[tp] = max(found.get(tp, -1), value.offset)
        return found

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit to every store; raises BrokerResponseError when Kafka refuses a partition."""
        if not offsets:
            return
        if KAFKA in self.stores:
            codes = self.admin.alter_offsets(self.group, dict(offsets))
            for tp, code in codes.items():
                if code:
                    raise BrokerResponseError(code, context=f"OffsetCommit of group {self.group!r} {tp}")
        if ZOOKEEPER in self.stores:
            for tp, offset in sorted(offsets.items()):
                self.zk.commit_offset(self.group, tp.topic, tp.partition, offset)

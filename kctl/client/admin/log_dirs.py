"""Moving replicas between a broker's log directories: AlterReplicaLogDirs, sent to the broker that
hosts the replicas. The broker answers at once and moves in the background; DescribeLogDirs
(``describe_log_dirs``) shows a move in progress as a future replica in its destination."""

from __future__ import annotations

from collections.abc import Mapping

from kctl.client.admin.base import AdminBase
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey
from kctl.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)


class LogDirAdmin(AdminBase):
    """Replica moves between log directories (see the module docstring)."""

    def alter_replica_log_dirs(
        self, broker_id: int, destinations: Mapping[TopicPartition, str], *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """Ask broker ``broker_id`` to move each of its replicas to a log directory (absolute path);
        the error code of each (0: the move started, or the replica is there already)."""
        if not destinations:
            return {}
        by_dir: dict[str, dict[str, list[int]]] = {}
        for tp, path in destinations.items():
            topic, partition = tp
            by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
        request = AlterReplicaLogDirsRequest(
            dirs=[
                AlterReplicaLogDir(
                    path=path,
                    topics=[AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()],
                )
                for path, topics in by_dir.items()
            ]
        )
        deadline = self._deadline(timeout)

        def call() -> dict[TopicPartition, int]:
            conn = self.cluster.connection(broker_id, deadline=deadline)
            r = conn.request(
                ApiKey.ALTER_REPLICA_LOG_DIRS, request, timeout=deadline.timeout(self.config.request_timeout)
            )
            return {
                TopicPartition(t.topic_name, p.partition_index): p.error_code
                for t in r.results
                for p in t.partitions
            }

        return self.cluster.retry(call, deadline=deadline)

"""``TopicPartition``: the one (topic, partition) value type every layer shares — the log's partition
directories, the broker's replica map and the clients' assignments and positions.

It prints as Kafka's ``TopicPartition`` does, ``topic-partition``. That is a display form only: the
on-disk partition directory is named by ``kctl.log.naming.partition_dir_name`` (``topic_partition``).
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

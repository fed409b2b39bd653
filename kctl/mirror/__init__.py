"""The mirror maker: continuous replication of one or more source clusters into a target cluster,
as one plain process (``kctl mirror``), built on the client library.

* ``batches``      — framing a Fetch answer into pieces; restamping a batch for the target without
  decoding its records (header fields and CRC-32C only).
* ``offset_syncs`` — which source offset became which target offset; the syncs topic; translation.
* ``topics``       — topic selection (include/exclude, internal topics, renaming, loop prevention)
  and keeping the target's topics in line (create with partitions and configs, add partitions).
* ``forwarder``    — the data path of one source: pipelined fetch and idempotent produce.
* ``groups``       — consumer group offsets translated onto the target.
* ``mirror``       — ``Mirror``: the run (threads per source, commits of positions, status).
"""

from kctl.mirror.batches import Piece, frame_partition, restamp
from kctl.mirror.forwarder import Forwarder, MirrorError, PartitionState
from kctl.mirror.groups import GroupTranslation, translate_groups
from kctl.mirror.mirror import ClusterSpec, Mirror, MirrorSpec, PartitionStatus, default_group
from kctl.mirror.offset_syncs import OFFSET_SYNCS_TOPIC, OffsetSync, OffsetSyncStore, read_offset_syncs
from kctl.mirror.topics import TopicAction, TopicPolicy, plan_topics

__all__ = [
    "OFFSET_SYNCS_TOPIC",
    "ClusterSpec",
    "Forwarder",
    "GroupTranslation",
    "Mirror",
    "MirrorError",
    "MirrorSpec",
    "OffsetSync",
    "OffsetSyncStore",
    "PartitionState",
    "PartitionStatus",
    "Piece",
    "TopicAction",
    "TopicPolicy",
    "default_group",
    "frame_partition",
    "plan_topics",
    "read_offset_syncs",
    "restamp",
    "translate_groups",
]

"""Data schemas (not an API) of the group coordinator's ``__consumer_offsets`` records, written from
the facts of Apache Kafka's message specs of the same names, so the topic reads the same with
Kafka's own tools. A record's key and value each start with an int16 version:

* OffsetCommitKey v0-1 (the same layout): group, topic, partition;
* GroupMetadataKey v2 (the key version tells the two apart): group;
* OffsetCommitValue v0-4 (flexible from v4): offset, leader epoch (v3+), metadata, commit
  timestamp, expire timestamp (v1 only);
* GroupMetadataValue v0-4 (flexible from v4): protocol type, generation, protocol, leader, state
  timestamp (v2+), members (id, instance id (v3+), client id, host, rebalance timeout (v1+),
  session timeout, subscription, assignment).

The keys are hashable (a key names a record's identity: the coordinator keeps the latest value per
key); treat them as immutable. Defaults are what kctl reads for fields an old version lacks (-1 for
unknown timestamps, epochs and timeouts). These modules define ``DataSchema`` objects
(``kctl.protocol.data``), never an ``ApiSchema`` named ``SCHEMA``: the API registry does not list them.
"""

from __future__ import annotations

from typing import Any

from kctl.protocol.data import DataSchema
from kctl.protocol.types import BYTES, INT32, INT64, STRING, Field, array, struct

_OffsetCommitKeyStruct: Any = struct(
    "OffsetCommitKey",
    Field("group", STRING),
    Field("topic", STRING),
    Field("partition", INT32),
)
_GroupMetadataKeyStruct: Any = struct("GroupMetadataKey", Field("group", STRING))


class OffsetCommitKey(_OffsetCommitKeyStruct):
    """The key of a committed offset (versions 0 and 1: the same fields)."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash((self.group, self.topic, self.partition))


class GroupMetadataKey(_GroupMetadataKeyStruct):
    """The key of a group's metadata (version 2 only: versions 0-1 are offset commit keys)."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self.group)


OffsetCommitValue = struct(
    "OffsetCommitValue",
    Field("offset", INT64),
    Field("leader_epoch", INT32, "3+", default=-1),
    Field("metadata", STRING),
    Field("commit_timestamp", INT64, default=-1),
    Field("expire_timestamp", INT64, "1", default=-1),
)

MemberMetadata = struct(
    "MemberMetadata",
    Field("member_id", STRING),
    Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    Field("client_id", STRING),
    Field("client_host", STRING),
    Field("rebalance_timeout", INT32, "1+", default=-1),
    Field("session_timeout", INT32),
    Field("subscription", BYTES),
    Field("assignment", BYTES),
)

GroupMetadataValue = struct(
    "GroupMetadataValue",
    Field("protocol_type", STRING),
    Field("generation", INT32),
    Field("protocol", STRING, nullable="0+", default=None),
    Field("leader", STRING, nullable="0+", default=None),
    Field("current_state_timestamp", INT64, "2+", default=-1),
    Field("members", array(MemberMetadata)),
)

OFFSET_COMMIT_KEY = DataSchema("OffsetCommitKey", "0-1", "none", OffsetCommitKey)
GROUP_METADATA_KEY = DataSchema("GroupMetadataKey", "2", "none", GroupMetadataKey)
OFFSET_COMMIT_VALUE = DataSchema("OffsetCommitValue", "0-4", "4+", OffsetCommitValue)
GROUP_METADATA_VALUE = DataSchema("GroupMetadataValue", "0-4", "4+", GroupMetadataValue)

"""Data schemas (not an API) of the ``consumer`` embedded protocol of Kafka's classic group protocol:
what a consumer puts in its JoinGroup metadata (ConsumerProtocolSubscription v0-3), what the leader
hands back through SyncGroup (ConsumerProtocolAssignment v0-3), and the sticky assignor's user data
(StickyAssignorUserData v0-1, written without a version prefix). Written from the facts of Apache
Kafka's message specs of the same names; none is flexible.

Layouts (big-endian; strings int16-length UTF-8, bytes int32-length with -1 for null, arrays
int32-counted), after the int16 version::

    Subscription  v0: topics [string], user_data nullable bytes
                  v1: + owned_partitions [topic string, partitions [int32]]
                  v2: + generation_id int32
                  v3: + rack_id nullable string
    Assignment v0-3: assigned_partitions [topic string, partitions [int32]], user_data nullable bytes

Both are read as Kafka's clients do: a newer version as the newest known one, the rest ignored
(``read_newer``); and the fields Kafka marks ignorable may be missing at the end (``may_end_before``:
some writers claim a version but stop early, others leave the assignment's user data out).

These modules define ``DataSchema`` objects (``kctl.protocol.data``), never an ``ApiSchema`` named
``SCHEMA``: the API registry does not list them.
"""

from __future__ import annotations

from kctl.protocol.data import DataSchema
from kctl.protocol.types import BYTES, INT32, STRING, Field, array, struct

PROTOCOL_TYPE = "consumer"
"""The JoinGroup ``protocol_type`` of consumer groups."""

ConsumerProtocolTopicPartition = struct(
    "TopicPartition",
    Field("topic", STRING),
    Field("partitions", array(INT32)),
)

ConsumerProtocolSubscription = struct(
    "ConsumerProtocolSubscription",
    Field("topics", array(STRING)),
    Field("user_data", BYTES, nullable="0+", default=None),
    Field("owned_partitions", array(ConsumerProtocolTopicPartition), "1+"),
    Field("generation_id", INT32, "2+", default=-1),
    Field("rack_id", STRING, "3+", nullable="3+", default=None),
)

ConsumerProtocolAssignment = struct(
    "ConsumerProtocolAssignment",
    Field("assigned_partitions", array(ConsumerProtocolTopicPartition)),
    Field("user_data", BYTES, nullable="0+", default=None),
)

StickyAssignorUserData = struct(
    "StickyAssignorUserData",
    Field("previous_assignment", array(ConsumerProtocolTopicPartition)),
    Field("generation", INT32, "1+", default=-1),
)

SUBSCRIPTION = DataSchema(
    "ConsumerProtocolSubscription",
    "0-3",
    "none",
    ConsumerProtocolSubscription,
    read_newer=True,
    may_end_before="owned_partitions",
)
ASSIGNMENT = DataSchema(
    "ConsumerProtocolAssignment",
    "0-3",
    "none",
    ConsumerProtocolAssignment,
    read_newer=True,
    may_end_before="user_data",
)
STICKY_ASSIGNOR_USER_DATA = DataSchema(
    "StickyAssignorUserData",
    "0-1",
    "none",
    StickyAssignorUserData,
    may_end_before="generation",
)

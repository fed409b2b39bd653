"""Consumer groups, client side: membership in a group (Kafka's classic consumer protocol), the
group-subscribing consumer, the partition assignors, and the group admin calls.

* ``coordinator`` — FindCoordinator, connections to a group's coordinator, OffsetCommit/OffsetFetch
  encoding.
* ``assignors``   — the partition assignors (range, roundrobin, sticky, cooperative-sticky).
* ``state``       — the member's states, errors and types shared by the parts below.
* ``member``      — ``Member``: the member's identity, generation, assignment and rebalance state.
* ``join``, ``heartbeat``, ``committer``, ``subscription``, ``rebalance`` — the collaborators of a
  membership, one job each: the JoinGroup/SyncGroup round and LeaveGroup, the heartbeat thread,
  commits and committed offsets, the subscribed topics and metadata checks, and what a rebalance
  does to the assignment (with the callbacks).
* ``membership``  — ``GroupMembership``: the façade the consumer drives, composing those parts.
* ``consumer``    — ``GroupConsumer``: a ``Consumer`` that subscribes through a group.
* ``admin``       — ``GroupAdmin``: list, describe and delete groups, committed offsets and lag.
* ``rewind``      — resetting a group's committed offsets: the strategies, the plan, its execution.

The group's settings (``kctl.client.group_config``) and the consumer protocol's encoding
(``kctl.client.consumer_protocol``) live beside this package.
"""

from kctl.client.group.admin import (
    STATES,
    GroupAdmin,
    GroupDescription,
    GroupListing,
    GroupNotEmptyError,
    MemberDescription,
    OffsetDeleteResult,
    PartitionOffsets,
)
from kctl.client.group.consumer import GroupConsumer
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.client.group.membership import GroupMembership
from kctl.client.group.rewind import (
    NothingToRewindError,
    OffsetsFileError,
    PlannedOffset,
    RewindPlan,
    ShiftBy,
    Strategy,
    ToCurrent,
    ToGroup,
    ToOffsets,
    TopicError,
    ToPoint,
    execute,
    plan_rewind,
)
from kctl.client.group.state import CommitFailedError, GroupMembershipError, MemberState

__all__ = [
    "STATES",
    "CommitFailedError",
    "GroupAdmin",
    "GroupConsumer",
    "GroupDescription",
    "GroupListing",
    "GroupMembership",
    "GroupMembershipError",
    "GroupNotEmptyError",
    "MemberDescription",
    "MemberState",
    "NothingToRewindError",
    "OffsetAndMetadata",
    "OffsetDeleteResult",
    "OffsetsFileError",
    "PartitionOffsets",
    "PlannedOffset",
    "RewindPlan",
    "ShiftBy",
    "Strategy",
    "ToCurrent",
    "ToGroup",
    "ToOffsets",
    "ToPoint",
    "TopicError",
    "execute",
    "plan_rewind",
]

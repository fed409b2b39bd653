"""The vocabulary shared by the parts of a group membership (``membership``, ``member``, ``join``,
``heartbeat``, ``committer``, ``rebalance``): the member's states, its errors, the outcome of a join
round, the callback types, and the error-code sets that decide what a coordinator's answer means
for the member."""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group.coordinator import OffsetAndMetadata
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ErrorCode

CLOSE_JOIN_WAIT = 5.0
"""Seconds ``close`` waits for a rebalance under way before leaving (unless given a timeout)."""
JOIN_TIMEOUT_LAPSE = 5.0
"""Seconds a JoinGroup/SyncGroup may take beyond the rebalance timeout (Kafka's lapse)."""
FATAL_JOIN_ERRORS = frozenset(
    {
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)
"""JoinGroup/SyncGroup/Heartbeat errors that end the membership: ``poll`` raises them."""
MEMBERSHIP_ERRORS = frozenset(
    {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS}
)

Partitions = frozenset[TopicPartition]
Callback = Callable[[Partitions], Any]
PositionsProvider = Callable[[], Mapping[TopicPartition, int | OffsetAndMetadata]]


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    """Not a member: never joined, left, or thrown out."""
    JOINING = "joining"
    """A JoinGroup/SyncGroup round is under way."""
    STABLE = "stable"
    """Member of the current generation, with an assignment."""


class GroupMembershipError(KafkaError):
    """The membership cannot go on (e.g. FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL)."""


class CommitFailedError(KafkaError):
    """A commit failed. ``errors``: partition -> BrokerResponseError for each failed partition."""

    def __init__(
        self, message: str, errors: Mapping[TopicPartition, BrokerResponseError] | None = None
    ) -> None:
        super().__init__(message)
        self.errors = dict(errors or {})
        self.retriable = bool(self.errors) and all(e.retriable for e in self.errors.values())


class JoinCancelled(Exception):
    """The membership was closed while a join was under way."""


@dataclass(frozen=True)
class JoinResult:
    """The outcome of one JoinGroup + SyncGroup round."""

    generation: int
    member_id: str
    protocol: str
    leader: str
    assignment: Partitions
    group_topics: dict[str, int] | None
    """For the leader: the partition count of every topic the group subscribes to."""



def show_partitions(partitions: Collection[TopicPartition]) -> str:
    if not partitions:
        return "nothing"
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}[{','.join(map(str, ps))}]" for t, ps in by_topic.items())


def in_group(group_id: str, error: object, doing: str = "") -> str:
    """``group 'G': [doing: ]error``, naming the group once: an error raised further down that says
    ``group 'G': ...`` already (a coordinator lookup) or ``JoinGroup of group 'G': ...`` (a
    request) loses that part instead of repeating it (``group 'G': JoinGroup: ...``)."""
    named = f"group {group_id!r}"
    text = str(error)
    if text.startswith(f"{named}: "):
        text = text[len(named) + 2 :]
    text = text.replace(f" of {named}: ", ": ", 1)
    return f"{named}: {doing}: {text}" if doing else f"{named}: {text}"

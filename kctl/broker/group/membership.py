"""A consumer group's in-memory state: its members, generation, chosen protocol, leader, state in the
classic rebalance protocol (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead), and its
committed offsets."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from kctl.broker.group.records import OffsetValue


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    expiry: asyncio.TimerHandle | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def cancel_expiry(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: set[str] = field(default_factory=set)  # ids handed out with MEMBER_ID_REQUIRED
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    offset_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    """The __consumer_offsets offset of the batch holding each committed offset (Kafka's
    appendedBatchOffset: a transactional commit completed by COMMIT replaces only an older one)."""
    pending_txn_offsets: dict[int, dict[tuple[str, int], tuple[OffsetValue, int]]] = field(
        default_factory=dict
    )
    """Producer id -> the offsets its open transaction committed (TxnOffsetCommit), each with the
    offset of its batch: invisible to OffsetFetch until the producer's COMMIT marker."""
    state_timestamp: int = -1
    rebalance_timer: asyncio.TimerHandle | None = None
    join_not_before: float = 0.0  # loop time before which a join may not complete (initial delay)

    def supports(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & set(protocols))

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        common = set(members[0].protocol_names)
        for member in members[1:]:
            common &= set(member.protocol_names)
        return common

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those every member supports."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name in member.protocol_names if name in candidates)] += 1
        return votes.most_common(1)[0][0]

    def all_joined(self) -> bool:
        return all(member.join_future is not None for member in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

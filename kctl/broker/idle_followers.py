"""Idle partitions of a follower's incremental fetch session (KIP-227, issue 29): a follower fetching
thousands of partitions from a leader names in each incremental request only those whose fetch
offset moved; the others it still fetches, and the leader must still answer for them. Most of them
are idle: the follower holds the whole log, the high watermark is the log end, nothing was appended.
For such a partition the leader's work is to note that the follower was caught up now (for the ISR's
``replica.lag.time.max.ms``), nothing else: no read, no high watermark to move, nothing to send.

``IdleFollower`` is what a full read of the partition saw when it found it idle (``settled``); the
next fetch checks that nothing it depends on moved (``still_idle``: the hosted partition and its log,
the version numbers of the partition's state and of the log's offsets, and what the fetcher was last
sent) and then only stamps the follower caught up. Anything
else, or a partition the request names, takes the full path of ``ReplicaManager.fetch``, which
decides exactly as before. An idle fetch of 3,333 partitions costs the leader a few attribute checks
each, not a read each, so the event loop is not held for tens of milliseconds by every follower's
poll."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kctl.broker.partition import FollowerState, Partition
    from kctl.broker.replica_manager import PartitionRead
    from kctl.log.log import Log

__all__ = ["IdleFollower", "settled", "still_idle"]


class IdleFollower:
    """A partition a follower has fully caught up on, as a full read saw it: the versions of the
    partition's state and of its log's offsets then (``Partition.state_version``,
    ``Log.offsets_version``), and the offsets the read found."""

    __slots__ = (
        "follower",
        "high_watermark",
        "last_stable_offset",
        "log",
        "log_start_offset",
        "offsets_version",
        "partition",
        "replica_id",
        "state_version",
    )

    def __init__(
        self, partition: Partition, replica_id: int, follower: FollowerState, read: PartitionRead
    ) -> None:
        self.partition = partition
        self.replica_id = replica_id
        self.log: Log = partition.log
        self.follower = follower
        self.state_version = partition.state_version
        self.offsets_version = self.log.offsets_version
        self.high_watermark = read.high_watermark  # = the log end offset (see ``settled``)
        self.last_stable_offset = read.last_stable_offset
        self.log_start_offset = read.log_start_offset


def settled(read: PartitionRead, replica_id: int, fetch_offset: int) -> IdleFollower | None:
    """After a follower's full read of a partition: its idle state when the read found the partition
    idle for this follower (no error, no records; the follower at the log end, in the ISR; the high
    watermark at the log end, so no fetch of anyone's can move it), else None."""
    partition = read.partition
    if read.error_code or read.records is not None or partition is None:
        return None
    log = partition.log
    end = log.log_end_offset
    if fetch_offset != end or read.high_watermark != end or replica_id not in partition.isr:
        return None
    if partition.isr_update_pending or not partition.is_leader:
        return None
    follower = partition.followers.get(replica_id)
    if follower is None or follower.log_end_offset != end:
        return None
    return IdleFollower(partition, replica_id, follower, read)


def still_idle(
    idle: IdleFollower,
    hosted: Partition | None,
    sent_high_watermark: int,
    sent_last_stable_offset: int,
    sent_log_start_offset: int,
    now_ms: int,
) -> bool:
    """Whether the partition is as ``idle`` saw it and the fetcher was sent its offsets (``hosted``:
    the partition the broker hosts under that name now); if so the follower is stamped caught up
    (what the full path would have done) and True is returned. Two version numbers stand for
    everything the full read depended on: the partition's state (leadership, leader epoch,
    replicas, ISR, the follower's state, a pending ISR write, the log itself) and the log's
    offsets (log start, high watermark, log end; the last stable offset moves only with them)."""
    partition = idle.partition
    if (
        hosted is not partition
        or partition.state_version != idle.state_version
        or idle.log.offsets_version != idle.offsets_version
        or partition.log is not idle.log
        or sent_high_watermark != idle.high_watermark
        or sent_last_stable_offset != idle.last_stable_offset
        or sent_log_start_offset != idle.log_start_offset
    ):
        return False
    follower = idle.follower
    follower.last_caught_up_ms = now_ms
    follower.last_fetch_ms = now_ms
    return True

"""A partition as this broker hosts it: its log, its role (leader or follower) and the leader's view
of replication — each follower's log end offset and last caught-up time, the ISR, the high
watermark — plus what waits on it: fetches parked until new data arrives (long polling: a follower's
woken by appends, a consumer's when the high watermark moves) and acks=all produces parked until the
high watermark passes their last offset. As follower, its high watermark is the leader's as its
fetches learn it (``follow_high_watermark``), which consumers fetching from this follower read up to
(KIP-392).

Roles come from the partition state the controller wrote (``make_leader`` / ``make_follower``, called
by ``ReplicaManager.sync``). As leader (Kafka's rules): the high watermark is the smallest log end
offset over the ISR (the leader's own included) and never decreases; a follower whose fetch reaches
the leader's log end offset is caught up at that fetch's time, and one whose fetch reaches the log
end offset the leader had at its previous fetch is caught up as of that previous fetch; a follower
not caught up for ``replica.lag.time.max.ms`` leaves the ISR; one that is not in the ISR joins it when
its log end offset reaches the high watermark (and the start of the current leader epoch). While
that expansion is being written, the high watermark is computed over the ISR with the joining
replicas (Kafka's "maximal ISR"): otherwise it could pass a joining replica's log end offset, and the
replica would enter the ISR without records already acknowledged — then lose them if elected.

In embedded mode (``replicated`` False) there is one replica and the log's high watermark follows its
log end offset on every append."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kctl.common.topic_partition import TopicPartition
from kctl.log.log import Log
from kctl.protocol.errors import ErrorCode

#: completes a parked acks=all produce: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND or NOT_LEADER_OR_FOLLOWER
AckResult = int


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower."""

    log_end_offset: int = -1
    log_start_offset: int = -1  # as its last fetch said (-1: not told)
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = -1


class Partition:
    """One hosted partition."""

    __slots__ = (
        "_acks",
        "_consumer_waiters",
        "_waiters",
        "broker_id",
        "controller_epoch",
        "elr",
        "followers",
        "isr",
        "isr_pending_additions",
        "isr_update_pending",
        "leader_epoch",
        "leader_epoch_start_offset",
        "leader_id",
        "log",
        "partition_epoch",
        "removing",
        "replicas",
        "replicated",
        "state_version",
        "topic_partition",
    )

    def __init__(
        self,
        topic_partition: TopicPartition,
        log: Log,
        *,
        leader_id: int,
        leader_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        broker_id: int | None = None,
        partition_epoch: int = 0,
        controller_epoch: int = 0,
        replicated: bool = False,
    ) -> None:
        self.topic_partition = topic_partition
        self.log = log
        self.broker_id = leader_id if broker_id is None else broker_id
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self.elr: tuple[int, ...] = ()  # eligible leader replicas (KIP-966), as last stored
        self.partition_epoch = partition_epoch
        self.controller_epoch = controller_epoch
        self.replicated = replicated
        self.leader_epoch_start_offset = log.log_end_offset
        self.followers: dict[int, FollowerState] = {}
        self.isr_update_pending = False
        self.isr_pending_additions: tuple[int, ...] = ()  # joining the ISR, the write in flight
        #: counts changes of leadership, leader epoch, replicas, ISR, followers and a pending ISR
        #: write (`state_changed`): a reader that kept them may keep them while this is unchanged
        self.state_version = 0
        # replicas a reassignment is removing (the topic's removing_replicas): never back into the ISR
        self.removing: tuple[int, ...] = ()
        self._waiters: list[asyncio.Future[None]] = []  # followers' fetches: woken by appends
        self._consumer_waiters: list[asyncio.Future[None]] = []  # woken when the high watermark moves
        self._acks: list[tuple[int, asyncio.Future[AckResult]]] = []

    # -- offsets -------------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    @property
    def below_min_isr(self) -> bool:
        """Replicated, and the ISR is smaller than ``min.insync.replicas`` (at most the replica
        count): the high watermark stands still (KIP-966)."""
        return self.replicated and len(self.isr) < min(self.min_insync_replicas, len(self.replicas))

    def elr_after(self, new_isr: tuple[int, ...]) -> tuple[int, ...]:
        """The eligible leader replicas once the ISR becomes ``new_isr`` (KIP-966): none while the
        ISR is at least ``min.insync.replicas``; below it, those kept so far and those leaving the ISR
        now (each holds every record below the high watermark, which stands still from here on), in
        assignment order, less the members of ``new_isr``."""
        if len(new_isr) >= min(self.min_insync_replicas, len(self.replicas)):
            return ()
        eligible = (set(self.elr) | set(self.isr)) - set(new_isr) - {self.broker_id}
        return tuple(r for r in self.replicas if r in eligible)

    # -- roles ---------------------------------------------------------------------------------
    def make_leader(
        self,
        leader_epoch: int,
        isr: tuple[int, ...],
        replicas: tuple[int, ...],
        partition_epoch: int,
        controller_epoch: int,
        now_ms: int,
    ) -> None:
        """Become (or stay) the leader at ``leader_epoch``: record where the epoch starts in the log,
        and start tracking the followers (those in the ISR count as caught up now)."""
        new_epoch = not self.is_leader or leader_epoch != self.leader_epoch
        self.leader_id, self.leader_epoch = self.broker_id, leader_epoch
        self.update_state(isr, replicas, partition_epoch, controller_epoch)
        if new_epoch:
            if self.replicated:
                self.log.assign_epoch_start_offset(leader_epoch)
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.followers = {
                replica: FollowerState(last_caught_up_ms=now_ms if replica in isr else 0)
                for replica in replicas
                if replica != self.broker_id
            }
            self.isr_update_pending = False
            self.isr_pending_additions = ()
            self.state_changed()
        self.maybe_advance_high_watermark()

    def make_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        replicas: tuple[int, ...],
        partition_epoch: int,
        controller_epoch: int,
    ) -> None:
        """Follow ``leader_id`` (-1: no leader) at ``leader_epoch``: parked acks=all produces fail with
        NOT_LEADER_OR_FOLLOWER and parked fetches wake up (to find this broker no longer leads)."""
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        self.update_state(isr, replicas, partition_epoch, controller_epoch)
        self.followers = {}
        self.isr_update_pending = False
        self.isr_pending_additions = ()
        self.state_changed()
        self.fail_acks(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.notify_append()

    def update_state(
        self, isr: tuple[int, ...], replicas: tuple[int, ...], partition_epoch: int, controller_epoch: int
    ) -> None:
        self.isr, self.replicas = tuple(isr), tuple(replicas)
        self.partition_epoch, self.controller_epoch = partition_epoch, controller_epoch
        for replica in replicas:
            if replica != self.broker_id and self.is_leader:
                self.followers.setdefault(replica, FollowerState())
        for replica in [r for r in self.followers if r not in replicas]:
            del self.followers[replica]
        self.state_changed()

    def state_changed(self) -> None:
        """Note a change of what ``state_version`` covers; whoever assigns one of those attributes
        from outside calls this."""
        self.state_version += 1

    # -- the leader's view of its followers ----------------------------------------------------
    def record_follower_fetch(
        self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> None:
        """A follower fetched from ``fetch_offset``: that is its log end offset (and
        ``log_start_offset``, when the fetch says, its log start offset)."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = now_ms
        elif fetch_offset >= follower.leader_end_at_last_fetch >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        if log_start_offset >= 0:
            follower.log_start_offset = log_start_offset
        follower.last_fetch_ms = now_ms
        follower.leader_end_at_last_fetch = leader_end

    def replica_to_add(self, replica_id: int) -> bool:
        """Whether ``replica_id`` should join the ISR: not in it, not being removed by a reassignment,
        and its log end offset has reached the high watermark and the start of the current leader
        epoch. A replica being removed is kept out because the metadata a broker reads may be torn:
        the controller writes the state that completes a reassignment (leaving the removed replicas
        out of the ISR) before the topic znode that drops them from the replicas, and a refresh
        reading between the two would let the leader write a removed replica back into the ISR."""
        follower = self.followers.get(replica_id)
        return (
            follower is not None
            and replica_id not in self.isr
            and replica_id not in self.removing
            and follower.log_end_offset >= self.high_watermark
            and follower.log_end_offset >= self.leader_epoch_start_offset
        )

    def out_of_sync_replicas(self, now_ms: int, lag_max_ms: int) -> set[int]:
        """ISR followers not caught up to the log end offset for longer than ``lag_max_ms``."""
        return {
            replica
            for replica in self.isr
            if replica != self.broker_id
            and (follower := self.followers.get(replica)) is not None
            and now_ms - follower.last_caught_up_ms > lag_max_ms
        }

    def maybe_advance_high_watermark(self) -> bool:
        """As leader: move the high watermark to the smallest log end offset over the ISR, if that is
        higher; complete the acks=all produces it passes and wake parked fetches. True if it moved.
        Not while the ISR is below ``min.insync.replicas`` (KIP-966): what only the leader (and too
        few others) hold stays invisible, so a replica that left the ISR then may lead without any
        consumer having read a record it lacks."""
        if not self.is_leader or self.below_min_isr:
            return False
        log = self.log
        new = log.log_end_offset
        for replica in (*self.isr, *self.isr_pending_additions):
            if replica == self.broker_id:
                continue
            follower = self.followers.get(replica)
            if follower is None or follower.log_end_offset < 0:
                return False  # not heard from since this broker became leader: wait
            new = min(new, follower.log_end_offset)
        if new <= log.high_watermark:
            return False
        log.update_high_watermark(new)
        self.complete_acks()
        self.notify_consumers()
        return True

    # -- as follower ---------------------------------------------------------------------------
    def follow_high_watermark(self, leader_high_watermark: int) -> None:
        """As follower: take the leader's high watermark, up to this replica's log end offset, and
        wake the consumers' fetches parked here when it moved (KIP-392: they read below it)."""
        log = self.log
        before = log.high_watermark
        if log.update_high_watermark(min(leader_high_watermark, log.log_end_offset)) != before:
            self.notify_consumers()

    # -- parked acks=all produces --------------------------------------------------------------
    def add_ack_waiter(self, required_offset: int) -> asyncio.Future[AckResult]:
        """A future completed once the high watermark reaches ``required_offset`` (the last offset
        appended + 1)."""
        future: asyncio.Future[AckResult] = asyncio.get_running_loop().create_future()
        self._acks.append((required_offset, future))
        self.complete_acks()
        return future

    def remove_ack_waiter(self, future: asyncio.Future[AckResult]) -> None:
        self._acks = [(offset, f) for offset, f in self._acks if f is not future]

    def complete_acks(self) -> None:
        if not self._acks:
            return
        if self.below_min_isr:  # the high watermark stands still: their records are not committed
            self.fail_acks(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            return
        high_watermark = self.log.high_watermark
        code = (
            ErrorCode.NONE
            if len(self.isr) >= self.min_insync_replicas
            else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        )
        waiting = []
        for offset, future in self._acks:
            if future.done():
                continue
            if high_watermark >= offset:
                future.set_result(code)
            else:
                waiting.append((offset, future))
        self._acks = waiting

    def fail_acks(self, code: int) -> None:
        acks, self._acks = self._acks, []
        for _offset, future in acks:
            if not future.done():
                future.set_result(code)

    # -- parked fetches ------------------------------------------------------------------------
    def add_waiter(self, waiter: asyncio.Future[None], *, follower: bool = False) -> None:
        """Park a fetch: a follower's is woken by appends (it reads to the log end), a consumer's
        when the high watermark moves (it reads below it); both by role changes."""
        (self._waiters if follower else self._consumer_waiters).append(waiter)

    @property
    def parked_fetches(self) -> int:
        """The fetches parked on this partition, followers' and consumers'."""
        return len(self._waiters) + len(self._consumer_waiters)

    def remove_waiter(self, waiter: asyncio.Future[None]) -> None:
        # membership first: a fetch parked on thousands of partitions removes itself from each, and
        # a ValueError raised and caught per partition cost more than the test
        waiters = self._waiters
        if waiters and waiter in waiters:
            waiters.remove(waiter)
        waiters = self._consumer_waiters
        if waiters and waiter in waiters:
            waiters.remove(waiter)

    def notify_append(self, *, consumers: bool = True) -> None:
        """Wake the followers' fetches parked on this partition, and the consumers' unless told
        otherwise (with replication an append does not move the high watermark by itself)."""
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            _wake_all(waiters)
        if consumers:
            self.notify_consumers()

    def notify_consumers(self) -> None:
        """Wake the consumers' fetches parked on this partition (the high watermark moved)."""
        if self._consumer_waiters:
            waiters, self._consumer_waiters = self._consumer_waiters, []
            _wake_all(waiters)


def _wake_all(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)

"""The controller: runs in the broker that won /controller and keeps every partition's state (leader,
leader epoch, ISR) and every reassignment moving, writing only to the registry (decision 1: brokers
learn their roles by watching the partition state znodes).

Events (registry notifications, admin requests, the auto-rebalance tick) are queued and processed
one at a time on one worker thread; listener callbacks only enqueue. Processing is level-triggered:
each event reads the registry's current view (live brokers, topics, partition states, controlled
shutdown, preferred election and reassignment requests) and writes what differs from what the rules
say, so a missed or coalesced notification is repaired by the next one. Every partition-state and
assignment write is fenced by the controller epoch (ControllerFence): when it fails with
ControllerMovedError this broker stops acting as controller; a PartitionStateConflictError (a leader
changed an ISR meanwhile) makes the event run again on fresh data.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from kctl.broker.controller import election
from kctl.broker.controller.reassignment import Reassigner
from kctl.zk.model import (
    ControllerFence,
    ControllerMovedError,
    PartitionState,
    PartitionStateConflictError,
    PartitionStateUpdate,
    RegistryError,
    TopicRecord,
)
from kctl.zk.registry import Registry

__all__ = ["REBALANCE", "ClusterView", "Controller"]

log = logging.getLogger("kctl.controller")

REBALANCE = "rebalance"
"""The auto leader rebalance tick (an event reason of the controller's own)."""
_BATCH = 500  # partition states per fenced multi-op


@dataclass
class ClusterView:
    """What one event works on: read from the registry at its start."""

    registered: set[int]
    shutting_down: set[int]
    topics: dict[str, TopicRecord]
    states: dict[tuple[str, int], PartitionState]
    unclean_default: bool
    updates: dict[tuple[str, int], PartitionStateUpdate] = field(default_factory=dict)
    restarting: set[int] = field(default_factory=set)
    offline: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    """The replicas each broker lost with a failed log dir (KIP-112): never leader or ISR member."""
    unreachable: dict[int, set[int]] = field(default_factory=dict)
    """The leaders each live broker reports it has had no answer from (its fetches there unanswered
    for ``replica.lag.time.max.ms``)."""
    """Brokers back from an unclean shutdown (their unsynced writes may be lost): out of every
    ISR and leadership before they take a role (`Registry.announce_unclean_restart`)."""

    @property
    def live(self) -> set[int]:
        """Brokers that may lead or stay in an ISR: registered, not shutting down and not back from
        an unclean shutdown unhandled (Kafka's liveBrokerIds)."""
        return self.registered - self.shutting_down - self.restarting

    def live_for(self, key: tuple[str, int]) -> set[int]:
        """The live brokers whose replica of ``key`` is online (not in a failed log dir)."""
        return {b for b in self.live if key not in self.offline.get(b, ())}

    def current(self, key: tuple[str, int]) -> PartitionState | None:
        """The state as this event has decided it so far."""
        update = self.updates.get(key)
        return update.state if update is not None else self.states.get(key)

    def unclean(self, topic: str) -> bool:
        value = self.topics[topic].configs.get("unclean.leader.election.enable")
        return self.unclean_default if value is None else value.strip().lower() == "true"

    def unreachable_reporters(self, key: tuple[str, int], leader: int, replicas: tuple[int, ...]) -> set[int]:
        """The live replicas of ``key`` (other than ``leader``) that report ``leader`` unreachable."""
        if not self.unreachable:
            return set()
        live = self.live_for(key) if self.offline else self.live
        return {r for r in replicas if r != leader and r in live and leader in self.unreachable.get(r, ())}

    def propose(
        self,
        key: tuple[str, int],
        decision: election.Decision | None,
        epoch: int,
        *,
        force: bool = False,
        drop_from_elr: frozenset[int] = frozenset(),
    ) -> None:
        """Record a new (leader, isr) for ``key``: a new leader epoch (the controller bumps it on
        every change it makes, as Kafka's ZooKeeper-mode controller does). Without ``force``, a
        decision equal to the current state is not a change. The eligible leader replicas carry
        over, less the new leader and ISR and ``drop_from_elr``."""
        if decision is None:
            return
        leader, isr = decision
        old = self.states.get(key)
        now = self.current(key)
        kept = now.elr if now is not None else ()
        elr = tuple(r for r in kept if r != leader and r not in isr and r not in drop_from_elr)
        if not force and now is not None and (now.leader, now.isr, now.elr) == (leader, tuple(isr), elr):
            return
        base_epoch = old.leader_epoch if old is not None else -1
        expected = old.partition_epoch if old is not None else -1
        state = PartitionState(leader, base_epoch + 1, tuple(isr), epoch, elr=elr)
        self.updates[key] = PartitionStateUpdate(key[0], key[1], state, expected)


class Controller:
    """The controller of one broker; active only while ``fence`` is set (this broker won)."""

    def __init__(
        self,
        broker_id: int,
        registry: Registry,
        *,
        unclean_leader_election: bool = False,
        imbalance_percentage: int = 10,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.registry = registry
        self.unclean_leader_election = unclean_leader_election
        self.imbalance_percentage = imbalance_percentage
        self.fence: ControllerFence | None = None
        self._on_change = on_change
        self._lock = threading.Lock()
        self._queue: asyncio.Queue[str] | None = None
        self._task: asyncio.Task[None] | None = None
        self._reassigner = Reassigner(self)
        self.leader_elections = 0  # leaders this controller changed (the metrics' counters)
        self.unclean_leader_elections = 0
        self.unreachable_leader_elections = 0  # leaders moved off a leader its followers lost

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.fence is not None

    def start(self) -> None:
        """Start the event loop (call from the broker's event loop)."""
        self._queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kctl-controller")

    async def stop(self) -> None:
        """Stop processing and resign, so that another broker takes over at once."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        # in a thread: an event still being processed there holds the lock until it is done
        await asyncio.to_thread(self._resign)

    def _resign(self) -> None:
        with self._lock:
            if self.fence is not None:
                self.fence = None
                try:
                    self.registry.resign_controller()
                    log.info("broker %d resigned as controller", self.broker_id)
                except RegistryError:
                    log.warning("could not resign as controller", exc_info=True)

    def exclusive(self) -> AbstractContextManager[object]:
        """Held, this controller processes no event: an admin request that reads what the controller
        writes and writes what it reads (a reassignment's cancel) runs under it, as Kafka's controller
        takes such a request among its events."""
        return self._lock

    def enqueue(self, reason: str) -> None:
        """Queue an event (from the broker's event loop thread)."""
        if self._queue is not None:
            self._queue.put_nowait(reason)

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            reasons = {await self._queue.get()}
            while not self._queue.empty():
                reasons.add(self._queue.get_nowait())
            retry = await asyncio.to_thread(self.process, reasons)
            if retry:
                await asyncio.sleep(0.1)
                self.enqueue("retry")

    # -- events ------------------------------------------------------------------------------------
    def process(self, reasons: set[str]) -> bool:
        """Handle one (coalesced) event: run for controller if there is none, then, if this broker
        is the controller, bring the cluster in line. Returns True when it should run again."""
        with self._lock:
            if self.fence is not None and self.registry.controller_fence() != self.fence:
                log.warning("broker %d lost controllership (ZooKeeper session)", self.broker_id)
                self.fence = None
            try:
                if self.fence is None or "controller" in reasons:
                    self._elect()
                if self.fence is None:
                    return False
                self._reconcile(rebalance=REBALANCE in reasons)
            except ControllerMovedError as error:
                log.warning("broker %d is no longer the controller: %s", self.broker_id, error)
                self.fence = None
                return False
            except PartitionStateConflictError as error:
                log.info("partition state changed under the controller (%s); running again", error)
                return True
            except RegistryError as error:
                log.warning("controller event %s failed: %s", sorted(reasons), error)
                return self.fence is not None
        if self._on_change is not None:
            self._on_change()
        return False

    def _elect(self) -> None:
        won = self.registry.try_become_controller(self.broker_id)
        fence = self.registry.controller_fence() if won else None
        if fence != self.fence:
            if fence is not None:
                log.info("broker %d is the controller (epoch %d)", self.broker_id, fence.epoch)
            self.fence = fence

    def read_view(self) -> ClusterView:
        registry = self.registry
        registered = {b.broker_id for b in registry.live_brokers()}
        shutting = {b for b in registry.controlled_shutdown_requests() if b in registered}
        restarting = registry.unclean_restarts()
        topics = registry.topics()
        states = registry.partition_states_of(topics)
        offline = {b: keys for b, keys in registry.offline_replicas().items() if b in registered}
        unreachable = {b: leaders for b, leaders in registry.unreachable_leaders().items() if b in registered}
        return ClusterView(
            registered,
            shutting,
            topics,
            states,
            self.unclean_leader_election,
            restarting=restarting,
            offline=offline,
            unreachable=unreachable,
        )

    def _reconcile(self, *, rebalance: bool) -> None:
        fence = self.fence
        assert fence is not None
        view = self.read_view()
        epoch = fence.epoch
        live = view.live
        preferred_requests = self.registry.admin_requests.preferred_election_requests()
        unclean_requests = self.registry.admin_requests.unclean_election_requests()
        for name, record in view.topics.items():
            for partition, replicas in record.assignment.items():
                key = (name, partition)
                state = view.states.get(key)
                if state is None:  # a new partition: its first state
                    alive = tuple(r for r in replicas if r in view.registered)
                    leaders = [r for r in alive if r in live]
                    view.propose(key, (leaders[0] if leaders else -1, alive or replicas[:1]), epoch)
                    continue
                live_here = view.live_for(key) if view.offline else live
                lost_dir = key in view.offline.get(state.leader, ())  # its log dir failed (KIP-112)
                if state.leader not in view.registered or lost_dir:  # leader dead, none or offline
                    # ElectLeaders(UNCLEAN) asks for an unclean election whatever the topic allows
                    unclean = view.unclean(name) or key in unclean_requests
                    decision = election.offline_partition_election(
                        replicas, state, live_here, unclean=unclean
                    )
                    if decision[0] >= 0 and decision[0] not in state.isr and decision[0] not in state.elr:
                        self.unclean_leader_elections += 1
                        log.warning(
                            "unclean leader election of %s-%d: broker %d, not in the ISR %s, leads; "
                            "records only the old ISR held are lost",
                            name,
                            partition,
                            decision[0],
                            list(state.isr),
                        )
                    elif decision[0] >= 0 and decision[0] not in state.isr:
                        log.warning(
                            "partition %s-%d: no live ISR member: eligible leader replica %d leads "
                            "(it holds every record below the high watermark)",
                            name,
                            partition,
                            decision[0],
                        )
                    view.propose(key, decision, epoch)
                elif state.leader in view.shutting_down or state.leader in view.restarting:
                    leaving = view.shutting_down | view.restarting
                    view.propose(
                        key, election.controlled_shutdown_election(replicas, state, live, leaving), epoch
                    )
                elif reporters := view.unreachable_reporters(key, state.leader, replicas):
                    moved = election.unreachable_leader_election(replicas, state, reporters)
                    if moved is not None:
                        self.unreachable_leader_elections += 1
                        log.warning(
                            "partition %s-%d: leader %d is alive but unreachable from %s (a majority "
                            "of its replicas): broker %d leads",
                            name,
                            partition,
                            state.leader,
                            sorted(reporters),
                            moved[0],
                        )
                    view.propose(key, moved, epoch)
                current = view.current(key)
                assert current is not None
                if current.leader >= 0:  # followers that died or are shutting down leave the ISR
                    gone = {r for r in current.isr if r not in live_here and r != current.leader}
                    view.propose(key, election.remove_from_isr(current, gone), epoch)
                lost = view.restarting.intersection(current.elr)
                if lost:  # back from an unclean shutdown: it may have lost what made it eligible
                    current = view.current(key)
                    assert current is not None
                    view.propose(key, (current.leader, current.isr), epoch, drop_from_elr=frozenset(lost))
                if preferred_requests is not None and (not preferred_requests or key in preferred_requests):
                    current = view.current(key)
                    assert current is not None
                    preferred = election.preferred_replica_election(replicas, current, live_here)
                    view.propose(key, preferred, epoch)
        if rebalance:
            self._rebalance(view, epoch)
        self._reassigner.step(view, fence)
        self._write(view, fence)
        if preferred_requests is not None:
            self.registry.admin_requests.set_preferred_election_requests(None)
        if unclean_requests:
            self.registry.admin_requests.finish_unclean_election_requests(unclean_requests)
        self._reassigner.finish(view, fence)
        self._answer_shutdowns(view)
        if view.offline:
            self.registry.finish_log_dir_events()
        for broker_id in sorted(view.restarting):
            log.warning(
                "broker %d restarted after an unclean shutdown: out of every ISR it was in (it may "
                "have lost unsynced writes); it rejoins them by catching up",
                broker_id,
            )
            self.registry.finish_unclean_restart(broker_id)

    def _rebalance(self, view: ClusterView, epoch: int) -> None:
        """Kafka's auto leader rebalance: for each broker, when more than
        ``leader.imbalance.per.broker.percentage`` of the partitions it is the preferred leader of
        are led by another broker, move those back to it (when it is alive and in the ISR)."""
        by_preferred: dict[int, list[tuple[str, int]]] = {}
        for name, record in view.topics.items():
            for partition, replicas in record.assignment.items():
                if replicas and partition not in record.adding_replicas:
                    by_preferred.setdefault(replicas[0], []).append((name, partition))
        for broker, keys in by_preferred.items():
            if broker not in view.live:
                continue
            misplaced = [k for k in keys if (s := view.current(k)) is not None and s.leader != broker]
            if not keys or len(misplaced) * 100 <= self.imbalance_percentage * len(keys):
                continue
            log.info("rebalancing %d partition(s) back to their preferred leader %d", len(misplaced), broker)
            for key in misplaced:
                state = view.current(key)
                assert state is not None
                replicas = view.topics[key[0]].assignment[key[1]]
                view.propose(key, election.preferred_replica_election(replicas, state, view.live), epoch)

    def _write(self, view: ClusterView, fence: ControllerFence) -> None:
        """Write the event's state changes, fenced, ``_BATCH`` per multi-op: those that change a
        leader first. A broker's death changes every partition whose ISR it was in, most of them
        only to take it out of the ISR; its partitions are led again after the few batches that
        move their leaders, not after all (10,300 changes at 10,000 partitions, 21 batches)."""
        updates = sorted(view.updates.values(), key=lambda u: not _moves_leader(view, u))
        for start in range(0, len(updates), _BATCH):
            batch = updates[start : start + _BATCH]
            self.leader_elections += sum(1 for u in batch if u.state.leader >= 0 and _moves_leader(view, u))
            stored = self.registry.set_partition_states(batch, fence)
            view.states.update(stored)
        for update in updates:
            log.info(
                "partition %s-%d: leader %d, leader epoch %d, isr %s",
                update.topic,
                update.partition,
                update.state.leader,
                update.state.leader_epoch,
                list(update.state.isr),
            )
        view.updates.clear()

    def _answer_shutdowns(self, view: ClusterView) -> None:
        """Answer each controlled shutdown request with the number of partitions the broker still
        leads although another live ISR member could take over (0: it may go). Unlike Kafka, a
        partition with no other live ISR member does not count: waiting cannot move it, so the last
        replica of a partition does not hold its broker's shutdown up."""
        for broker, (state, remaining) in self.registry.controlled_shutdown_requests().items():
            led = sum(
                1
                for s in view.states.values()
                if s.leader == broker and any(r != broker and r in view.live for r in s.isr)
            )
            if state != "done" or remaining != led:
                self.registry.answer_controlled_shutdown(broker, led)


def _moves_leader(view: ClusterView, update: PartitionStateUpdate) -> bool:
    """Whether ``update`` gives its partition a leader other than the one it has (or its first)."""
    old = view.states.get((update.topic, update.partition))
    return old is None or old.leader != update.state.leader

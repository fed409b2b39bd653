"""Partition reassignment as Kafka's ZooKeeper-mode controller does it (KIP-455's steps), driven by
/admin/reassign_partitions.

For a partition with current replicas OR asked to move to target replicas TR:
1. Start: the topic znode's replicas become RS = TR + (OR - TR), with ``adding_replicas`` = TR - OR
   and ``removing_replicas`` = OR - TR (progress is visible there); the leader epoch is bumped so
   that every replica of RS re-reads its role (the new ones start fetching: c2's followers copy the
   data, the controller only changes assignments and states).
2. Wait until every replica of TR is in the ISR (the leader expands the ISR; the controller hears of
   it through the partition state watch).
3. Complete: if the leader is not in TR (or is not alive), elect one from TR ∩ ISR; the ISR becomes
   ISR ∩ TR (new leader epoch); the topic znode's replicas become TR, its adding/removing entries
   for the partition are dropped; the request's entry is removed from /admin/reassign_partitions
   (the znode is deleted when none is left).
A request whose target equals the current replicas, or names an unknown partition, is dropped."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kctl.broker.controller import election
from kctl.zk.model import ControllerFence

if TYPE_CHECKING:
    from kctl.broker.controller.controller import ClusterView, Controller

__all__ = ["Reassigner"]

log = logging.getLogger("kctl.controller.reassignment")


class Reassigner:
    """The reassignment part of one controller's event processing."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self._completed: dict[tuple[str, int], tuple[int, ...]] = {}
        self._dropped: set[tuple[str, int]] = set()
        self._requests: dict[tuple[str, int], tuple[int, ...]] = {}

    def step(self, view: ClusterView, fence: ControllerFence) -> None:
        """Start new reassignments (their topic znodes are written now, before the leader epoch
        bump the controller writes with its other state changes) and propose the state changes of
        the ones that can complete (their topic znodes are written by finish(), after the states)."""
        registry = self.controller.registry
        self._completed.clear()
        self._dropped.clear()
        self._requests = registry.admin_requests.reassignment_requests()
        started: dict[str, tuple[dict[int, tuple[int, ...]], ...]] = {}
        for key, target in sorted(self._requests.items()):
            name, partition = key
            record = view.topics.get(name)
            state = view.current(key)
            if record is None or partition not in record.assignment or not target:
                self._dropped.add(key)
                continue
            current = record.assignment[partition]
            if partition not in record.adding_replicas and partition not in record.removing_replicas:
                if tuple(current) == tuple(target):
                    self._dropped.add(key)
                    continue
                assignment, adding, removing = started.setdefault(
                    name,
                    (dict(record.assignment), dict(record.adding_replicas), dict(record.removing_replicas)),
                )
                assignment[partition] = tuple(target) + tuple(r for r in current if r not in target)
                adding[partition] = tuple(r for r in target if r not in current)
                removing[partition] = tuple(r for r in current if r not in target)
                log.info("reassigning %s-%d: %s -> %s", name, partition, list(current), list(target))
                if state is not None:  # a new leader epoch: every replica re-reads its role
                    view.propose(key, (state.leader, state.isr), fence.epoch, force=True)
                continue
            if state is None or not all(r in state.isr for r in target):
                continue  # step 2: the new replicas are still catching up
            decision = election.reassignment_election(target, state, view.live)
            if decision is None:
                continue
            view.propose(key, decision, fence.epoch, force=True)
            self._completed[key] = tuple(target)
        for name, (assignment, adding, removing) in started.items():
            view.topics[name] = registry.set_topic_assignment(name, assignment, adding, removing, fence)

    def finish(self, view: ClusterView, fence: ControllerFence) -> None:
        """After the states are written: the completed partitions' replicas become their targets,
        and the handled entries leave /admin/reassign_partitions."""
        registry = self.controller.registry
        by_topic: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
        for (name, partition), target in self._completed.items():
            by_topic.setdefault(name, []).append((partition, target))
        for name, moves in by_topic.items():
            record = registry.get_topic(name)
            if record is None:
                continue
            assignment = dict(record.assignment)
            adding, removing = dict(record.adding_replicas), dict(record.removing_replicas)
            for partition, target in moves:
                assignment[partition] = target
                adding.pop(partition, None)
                removing.pop(partition, None)
                log.info("reassignment of %s-%d to %s complete", name, partition, list(target))
            view.topics[name] = registry.set_topic_assignment(name, assignment, adding, removing, fence)
        handled = {**self._completed, **{k: self._requests[k] for k in self._dropped}}
        if handled:
            current = registry.admin_requests.reassignment_requests()
            registry.admin_requests.set_reassignment_requests(
                {k: v for k, v in current.items() if handled.get(k) != tuple(v)}
            )

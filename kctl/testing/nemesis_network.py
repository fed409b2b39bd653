"""Network partitions as faults of a `kctl.testing.jepsen.Campaign` (issue 24's network nemesis), on a
cluster whose brokers and ZooKeeper server each run in a network namespace of a `NetworkLab`
(kctl.testing.netns). Each fault cuts links with silent packet drops, waits for what Kafka's design
says must happen, heals, waits until every replica is back in the ISR, and returns one line saying
what it did:

- `isolate_leader`: a partition leader reaches nothing (other brokers, ZooKeeper, clients); its
  followers report it unreachable (or, when it is the controller, its session expires and another
  broker becomes controller), another broker leads, the writers go on.
- `cut_leader_from_zookeeper`: the zombie leader — cut from ZooKeeper only, while its clients and
  followers still reach it; another broker leads once its session expires. Whatever the zombie
  answered meanwhile, acknowledged writes it took would show as lost or as offsets reused.
- `cut_leader_from_followers`: the leader keeps ZooKeeper and its clients but no follower reaches it.
  Its session is alive, so Kafka would keep it leader (alone in the ISR, taking no acks=all write)
  until the heal; kctl's followers report it unreachable and the controller moves leadership to one
  of them (kctl.broker.replication.reachability). The writers go on once another broker leads; the
  old leader must acknowledge nothing meanwhile.
- `bridge`: Jepsen's bridge — the leader and one follower cannot reach each other, a third broker
  (and ZooKeeper, and the clients) reaches both; the cut follower leaves the ISR, writes go on.
- `asymmetric_leader_to_followers`: only the leader's packets to its followers are dropped
  (followers' fetch requests still arrive; nothing comes back). A leader that took a fetch it could
  not answer as proof of replication would acknowledge writes no follower has. The followers hear
  nothing, so they report it as for the cut, and another broker leads.

The campaign's writers keep producing with acks=all throughout; the checker then requires that
nothing acknowledged was lost, duplicated, reordered or acknowledged at one offset twice."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import Load, wait_for_progress
from kctl.testing.netns import NetworkLab, Node

FAULT_TIMEOUT_S = 60.0


class NetworkNemesis:
    """The faults above for one lab, its broker nodes (broker id -> node) and ZooKeeper's node (None
    when ZooKeeper is reached through the root namespace, e.g. through `ZooKeeperLinks` proxies
    listening on the lab's ``client_ip``: `isolate_leader` then cuts it too, and
    `cut_leader_from_zookeeper` is not available)."""

    def __init__(
        self, lab: NetworkLab, brokers: Mapping[int, Node], zookeeper: Node | None, view: ClusterView
    ) -> None:
        self.lab = lab
        self.brokers = dict(brokers)
        self.zookeeper = zookeeper
        self.view = view

    def _leader(self, topic: str, partition: int) -> int:
        return self.view.wait_for_leader(topic, partition, timeout=FAULT_TIMEOUT_S).leader

    def _heal_and_wait(self, topic: str) -> None:
        self.lab.heal()
        for index, replicas in sorted(self.view.assignment(topic).items()):
            self.view.wait_for_isr(topic, index, set(replicas), timeout=FAULT_TIMEOUT_S)

    def _followers(self, topic: str, partition: int, leader: int) -> list[int]:
        return [b for b in self.view.assignment(topic)[partition] if b != leader]

    def isolate_leader(self, topic: str, partition: int, loads: Sequence[Load]) -> str:
        """Isolate a partition leader. The line says whether it was also the controller (then no
        election can start before its session expires) and how long until another broker led."""
        leader = self._leader(topic, partition)
        role = " and controller" if self.view.controller_id() == leader else ""
        self.lab.isolate(self.brokers[leader])
        started = time.monotonic()
        try:
            self.view.wait_for_leader(topic, partition, not_in={leader}, timeout=FAULT_TIMEOUT_S)
            elected = time.monotonic() - started
            wait_for_progress(loads, 50, timeout=FAULT_TIMEOUT_S)
        finally:
            self._heal_and_wait(topic)
        return (
            f"isolated broker {leader}{role} (leader of {topic}/{partition}) from everything until "
            f"another led ({elected:.1f} s)"
        )

    def cut_leader_from_zookeeper(self, topic: str, partition: int, loads: Sequence[Load]) -> str:
        if self.zookeeper is None:
            raise ValueError("ZooKeeper has no node of its own in this lab: use ZooKeeperLinks to cut it")
        leader = self._leader(topic, partition)
        self.lab.cut(self.brokers[leader], self.zookeeper)
        try:
            self.view.wait_for_leader(topic, partition, not_in={leader}, timeout=FAULT_TIMEOUT_S)
            wait_for_progress(loads, 50, timeout=FAULT_TIMEOUT_S)
        finally:
            self._heal_and_wait(topic)
        return f"cut broker {leader} (leader of {topic}/{partition}) from ZooKeeper only until another led"

    def _cut_from_followers(
        self, topic: str, partition: int, loads: Sequence[Load], *, one_way: bool
    ) -> tuple[int, list[int], int]:
        """Cut ``partition``'s leader from its followers (both ways, or only its packets to them)
        until another broker leads it (the followers report it unreachable; its session stays
        alive) and the writers made progress, then heal; the old leader, the followers and the new
        leader."""
        leader = self._leader(topic, partition)
        followers = self._followers(topic, partition, leader)
        cut = self.lab.cut_one_way if one_way else self.lab.cut
        for follower in followers:
            cut(self.brokers[leader], self.brokers[follower])
        try:
            new_leader = self.view.wait_for_leader(
                topic, partition, not_in={leader}, timeout=FAULT_TIMEOUT_S
            ).leader
            wait_for_progress(loads, 50, timeout=FAULT_TIMEOUT_S)
        finally:
            self._heal_and_wait(topic)
        return leader, followers, new_leader

    def cut_leader_from_followers(self, topic: str, partition: int, loads: Sequence[Load]) -> str:
        leader, followers, new_leader = self._cut_from_followers(topic, partition, loads, one_way=False)
        return (
            f"cut broker {leader} (leader of {topic}/{partition}) from its followers {followers} "
            f"until broker {new_leader} led"
        )

    def bridge(self, topic: str, partition: int, loads: Sequence[Load]) -> str:
        leader = self._leader(topic, partition)
        cut_off = self._followers(topic, partition, leader)[-1]
        bridge = next((b for b in self.brokers if b not in (leader, cut_off)), None)
        self.lab.cut(self.brokers[leader], self.brokers[cut_off])
        try:
            self.view.wait_for(
                lambda: cut_off not in self.view.isr_of(topic, partition),
                f"broker {cut_off} out of the ISR of {topic}/{partition}",
                FAULT_TIMEOUT_S,
            )
            wait_for_progress(loads, 50, timeout=FAULT_TIMEOUT_S)
        finally:
            self._heal_and_wait(topic)
        return (
            f"bridge: broker {leader} (leader of {topic}/{partition}) and broker {cut_off} cut, "
            f"broker {bridge} and ZooKeeper reaching both, until {cut_off} left the ISR"
        )

    def asymmetric_leader_to_followers(self, topic: str, partition: int, loads: Sequence[Load]) -> str:
        leader, followers, new_leader = self._cut_from_followers(topic, partition, loads, one_way=True)
        return (
            f"dropped broker {leader}'s packets (leader of {topic}/{partition}) to its followers "
            f"{followers}, one way, until broker {new_leader} led"
        )

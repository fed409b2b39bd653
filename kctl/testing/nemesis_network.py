"""Network partitions as faults of a `kctl.testing.jepsen.Campaign` (issue 24's network nemesis), on a
cluster whose brokers and ZooKeeper server each run in a network namespace of a `NetworkLab`
(kctl.testing.netns). Each fault cuts links with silent packet drops, waits for what Kafka's design
says must happen, heals, waits until every replica is back in the ISR, and returns one line saying
what it did:

- `isolate_leader`: a partition leader reaches nothing (other brokers, ZooKeeper, clients); its
  session expires, another broker leads, the writers go on.
- `cut_leader_from_zookeeper`: the zombie leader — cut from ZooKeeper only, while its clients and
  followers still reach it; another broker leads once its session expires. Whatever the zombie
  answered meanwhile, acknowledged writes it took would show as lost or as offsets reused.
- `cut_leader_from_followers`: the leader keeps ZooKeeper and its clients but no follower reaches it;
  it shrinks the ISR to itself (it stays leader: its session is alive), so with min.insync.replicas=2
  acks=all writes to it fail with NOT_ENOUGH_REPLICAS until the heal — and none may be acknowledged.
- `bridge`: Jepsen's bridge — the leader and one follower cannot reach each other, a third broker
  (and ZooKeeper, and the clients) reaches both; the cut follower leaves the ISR, writes go on.
- `asymmetric_leader_to_followers`: only the leader's packets to its followers are dropped
  (followers' fetch requests still arrive; nothing comes back). A leader that took a fetch it could
  not answer as proof of replication would acknowledge writes no follower has.

The campaign's writers keep producing with acks=all throughout; the checker then requires that
nothing acknowledged was lost, duplicated, reordered or acknowledged at one offset twice."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from kctl.testing.cluster_view import ClusterView
from kctl.testing.jepsen import Load, wait_for_progress
from kctl.testing.netns import NetworkLab, Node

FAULT_TIMEOUT_S = 60.0
STALLED_HOLD_S = 5.0


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

    def _go_on_without(self, topic: str, leader: int, loads: Sequence[Load]) -> str:
        """While ``leader`` takes no acks=all write (alone in its ISRs): wait until the writers made
        progress on the partitions other brokers lead or, when it leads them all (nothing can be
        written until the heal, in Kafka too), hold the cut ``STALLED_HOLD_S``."""
        led_elsewhere = [
            p for p in self.view.assignment(topic) if self.view.leader_of(topic, p) not in (leader, None, -1)
        ]
        if led_elsewhere:
            wait_for_progress(loads, 50, timeout=FAULT_TIMEOUT_S)
            return "the writers went on elsewhere"
        time.sleep(STALLED_HOLD_S)  # the fault's length: no progress is possible meanwhile
        return f"it led every partition: held {STALLED_HOLD_S:g} s"

    def isolate_leader(self, topic: str, partition: int, loads: Sequence[Load]) -> str:
        leader = self._leader(topic, partition)
        self.lab.isolate(self.brokers[leader])
        try:
            self.view.wait_for_leader(topic, partition, not_in={leader}, timeout=FAULT_TIMEOUT_S)
            wait_for_progress(loads, 50, timeout=FAULT_TIMEOUT_S)
        finally:
            self._heal_and_wait(topic)
        return f"isolated broker {leader} (leader of {topic}/{partition}) from everything until another led"

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

    def _leader_alone(
        self, topic: str, partition: int, loads: Sequence[Load], *, one_way: bool
    ) -> tuple[int, list[int], str]:
        """Cut ``partition``'s leader from its followers (both ways, or only its packets to them)
        until it is alone in the ISR (it keeps its session, so it stays leader), then heal; the
        leader, the followers and what the writers did meanwhile."""
        leader = self._leader(topic, partition)
        followers = self._followers(topic, partition, leader)
        cut = self.lab.cut_one_way if one_way else self.lab.cut
        for follower in followers:
            cut(self.brokers[leader], self.brokers[follower])
        try:
            self.view.wait_for_isr(topic, partition, {leader}, timeout=FAULT_TIMEOUT_S)
            then = self._go_on_without(topic, leader, loads)
        finally:
            self._heal_and_wait(topic)
        return leader, followers, then

    def cut_leader_from_followers(self, topic: str, partition: int, loads: Sequence[Load]) -> str:
        leader, followers, then = self._leader_alone(topic, partition, loads, one_way=False)
        return (
            f"cut broker {leader} (leader of {topic}/{partition}) from its followers {followers} "
            f"until alone in the ISR; {then}"
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
        leader, followers, then = self._leader_alone(topic, partition, loads, one_way=True)
        return (
            f"dropped broker {leader}'s packets (leader of {topic}/{partition}) to its followers "
            f"{followers}, one way, until alone in the ISR; {then}"
        )

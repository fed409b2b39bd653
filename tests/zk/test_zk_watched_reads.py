"""Partition states kept under their watches (kctl.zk.watched_reads): a metadata refresh reads from
ZooKeeper only the states that changed since it last read them, and never serves a kept state once
its change was announced — also across a lost connection. Against a real ZooKeeper server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kctl.testing import Notifications, ZooKeeperServer
from kctl.testing.tcp_proxy import TcpProxy
from kctl.zk.model import PartitionState, TopicRecord
from kctl.zk.watched_reads import WatchedReads
from kctl.zk.zookeeper import ZooKeeperRegistry, split_connect

PARTITIONS = 4


# -- the rules, alone -----------------------------------------------------------------------------
def test_a_read_is_kept_only_under_the_generation_it_was_issued_in() -> None:
    reads: WatchedReads[str, int] = WatchedReads()
    hits, misses = reads.lookup(["a"])
    assert hits == {} and misses == [("a", None)]
    reads.keep("a", None, 1)  # not armed: not kept
    assert reads.lookup(["a"])[0] == {}

    reads.armed("a")
    _, [(_, generation)] = reads.lookup(["a"])
    assert generation is not None
    reads.keep("a", generation, 1)
    assert reads.lookup(["a"])[0] == {"a": 1}

    reads.disarm("a")  # the watch fired
    assert reads.lookup(["a"])[0] == {}
    reads.armed("a")
    reads.keep("a", generation, 2)  # issued before the change: not kept
    assert reads.lookup(["a"])[0] == {}

    _, [(_, newer)] = reads.lookup(["a"])
    reads.keep("a", newer, 3)
    reads.disarm_all()
    assert reads.lookup(["a"])[0] == {} and len(reads) == 0


# -- against ZooKeeper ----------------------------------------------------------------------------
class CountingReads:
    """Counts the get requests a registry's kazoo client sends."""

    def __init__(self, registry: ZooKeeperRegistry) -> None:
        self.paths: list[str] = []
        client = registry.kazoo_client
        original = client.get_async

        def get_async(path: str, *args: Any, **kwargs: Any) -> Any:
            self.paths.append(path)
            return original(path, *args, **kwargs)

        client.get_async = get_async  # type: ignore[method-assign]

    def states(self) -> list[str]:
        return [p for p in self.paths if p.endswith("/state")]


def _chroot(zookeeper: ZooKeeperServer) -> str:
    """A chroot of its own on the session's shared server."""
    return f"{zookeeper.connect_string()}/watched-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def registries(zookeeper: ZooKeeperServer) -> Iterator[tuple[ZooKeeperRegistry, ZooKeeperRegistry]]:
    connect = _chroot(zookeeper)
    admin = ZooKeeperRegistry(connect, connection_timeout_ms=10_000)
    other = ZooKeeperRegistry(connect, connection_timeout_ms=10_000)
    admin.start()
    other.start()
    yield admin, other
    other.close()
    admin.close()


def _topic_with_states(
    admin: ZooKeeperRegistry, other: ZooKeeperRegistry, seen: Notifications
) -> TopicRecord:
    admin.create_topic("t", {p: (1,) for p in range(PARTITIONS)}, {})
    for p in range(PARTITIONS):
        admin.set_partition_state("t", p, PartitionState(1, 0, (1,)))
    assert seen.wait_for(lambda: len(other.partition_states_of(other.topics())) == PARTITIONS)
    record = other.get_topic("t")
    assert record is not None
    return record


def test_unchanged_states_are_not_read_again(registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry]) -> None:
    admin, other = registries
    seen = Notifications()
    other.add_listener(seen)
    record = _topic_with_states(admin, other, seen)
    first = other.partition_states_of({"t": record})
    counting = CountingReads(other)
    # The watch events of the states' creation may still be on their way (each makes its state be
    # read once more); then no state is read again.
    deadline = time.monotonic() + 10
    while True:
        counting.paths.clear()
        again = other.partition_states_of({"t": record})
        if not counting.states() or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert again == first
    assert counting.states() == [], "states read again though no watch fired"

    seen.clear()
    admin.set_partition_state("t", 2, PartitionState(1, 1, (1,)))
    assert seen.wait_for_reason("partitions")
    changed = other.partition_states_of({"t": record})
    assert changed[("t", 2)].leader_epoch == 1
    assert counting.states() == ["/brokers/topics/t/partitions/2/state"], "read more than the changed state"


def test_an_announced_change_is_never_served_from_the_kept_reads(
    registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry],
) -> None:
    """The broker refreshes when it hears "partitions": that refresh must read the new state (the
    watch's key is forgotten before the listeners hear of it)."""
    admin, other = registries
    seen = Notifications()
    other.add_listener(seen)
    record = _topic_with_states(admin, other, seen)
    for epoch in range(1, 31):
        partition = epoch % PARTITIONS
        other.partition_states_of({"t": record})  # keep everything, as a refresh does
        seen.clear()
        admin.set_partition_state("t", partition, PartitionState(1, epoch, (1,)))
        assert seen.wait_for_reason("partitions")
        state = other.partition_states_of({"t": record})[("t", partition)]
        assert state.leader_epoch == epoch, f"served the kept state of epoch {state.leader_epoch}"


def test_unchanged_topics_are_not_read_again_and_config_changes_are(
    registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry],
) -> None:
    admin, other = registries
    seen = Notifications()
    other.add_listener(seen)
    _topic_with_states(admin, other, seen)
    first = other.topics()
    counting = CountingReads(other)
    assert other.topics() == first
    assert [p for p in counting.paths if p != "/brokers/topics"] == [], "topics read again unchanged"

    seen.clear()
    admin.set_topic_configs("t", {"retention.ms": "1000"})
    assert seen.wait_for_reason("configs")
    assert other.topics()["t"].configs == {"retention.ms": "1000"}, "served the kept overrides"

    for added in range(1, 16):
        other.topics()  # keep it
        seen.clear()
        admin.add_partitions("t", {PARTITIONS + added - 1: (1,)})
        assert seen.wait_for_reason("topics")
        assert other.topics()["t"].partitions == PARTITIONS + added, "served the kept assignment"


def test_a_registry_reads_its_own_writes_at_once(
    registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry],
) -> None:
    """A registry's own write fires its own watches, and ZooKeeper sends those events before the
    write's answer: its next read runs their callbacks first (``settle_watches``), so the written
    keys are read anew while every other kept read stays kept."""
    admin, other = registries
    seen = Notifications()
    other.add_listener(seen)
    record = _topic_with_states(admin, other, seen)
    for epoch in range(1, 21):
        other.topics()
        other.partition_states_of({"t": record})  # keep everything
        other.set_partition_state("t", 0, PartitionState(1, epoch, (1,)))
        assert other.partition_states_of({"t": record})[("t", 0)].leader_epoch == epoch
        other.set_topic_configs("t", {"retention.ms": str(epoch)})
        assert other.topics()["t"].configs == {"retention.ms": str(epoch)}


def test_changes_made_while_the_connection_was_down_are_read(zookeeper: ZooKeeperServer) -> None:
    """kazoo loses every watch with the connection (ZooKeeper does not resend them): a state changed
    while a broker was cut from ZooKeeper is read anew once the connection is back."""
    connect = _chroot(zookeeper)
    hosts, chroot = split_connect(connect)
    port = int(hosts.split(",")[0].rsplit(":", 1)[1])
    admin = ZooKeeperRegistry(connect, connection_timeout_ms=10_000)
    with TcpProxy(port) as proxy:
        other = ZooKeeperRegistry(
            f"127.0.0.1:{proxy.port}{chroot or ''}", session_timeout_ms=30_000, connection_timeout_ms=2_000
        )
        try:
            admin.start()
            other.start()
            seen = Notifications()
            other.add_listener(seen)
            record = _topic_with_states(admin, other, seen)
            assert other.partition_states_of({"t": record})[("t", 0)].leader_epoch == 0

            seen.clear()
            proxy.cut()
            assert seen.wait_for_reason("session", timeout=30), "the cut was not noticed"
            admin.set_partition_state("t", 0, PartitionState(1, 7, (1,)))
            seen.clear()
            proxy.heal()
            connected = other.session_state
            back = seen.wait_for(lambda: "partitions" in seen.reasons and connected() == "connected", 60)
            assert back, "no notification after the connection came back"
            assert other.partition_states_of({"t": record})[("t", 0)].leader_epoch == 7
        finally:
            other.close()
            admin.close()


def test_a_read_after_a_change_elsewhere_returns_it_without_waiting_for_the_notification(
    registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry],
) -> None:
    """As without kept reads: once a change made through another session is done, a read returns
    it, even before its watch event has been handled (a broker that woke from a stall re-reads the
    metadata at once and must not lead on a kept state: issue 24's zombie coordinator)."""
    admin, other = registries
    seen = Notifications()
    other.add_listener(seen)
    record = _topic_with_states(admin, other, seen)
    for epoch in range(1, 41):
        other.topics()
        other.partition_states_of({"t": record})  # keep everything
        admin.set_partition_state("t", 1, PartitionState(1, epoch, (1,)))
        state = other.partition_states_of({"t": record})[("t", 1)]
        assert state.leader_epoch == epoch, f"served the kept state of epoch {state.leader_epoch}"
        admin.set_topic_configs("t", {"retention.ms": str(epoch)})
        assert other.topics()["t"].configs == {"retention.ms": str(epoch)}, "served the kept overrides"

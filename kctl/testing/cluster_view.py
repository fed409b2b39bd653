"""``ClusterView``: what a `LocalCluster`'s ZooKeeper says, read directly, for fault-injection tests.

    with ClusterView(cluster.zookeeper_connect) as view:
        leader = view.wait_for(lambda: view.leader_of("t", 0) not in (None, -1), "a leader")
        view.wait_for_isr("t", 0, {1, 2, 3})
        history = view.watch_partition_states("t", 0)   # every state version seen, in order

The view reads the znodes in Kafka's layout (``/controller``, ``/brokers/ids``,
``/brokers/topics/<t>/partitions/<p>/state``) with its own kazoo session, so it sees what the
brokers' registries see and never goes through the brokers themselves. `wait_for` polls with a
deadline (never a bare sleep) and fails with what it last saw.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

T = TypeVar("T")
POLL_INTERVAL = 0.05


class ClusterWaitTimeout(AssertionError):
    """A condition on the cluster's state did not come true before its deadline."""


@dataclass(frozen=True)
class PartitionStateVersion:
    """One version of a partition state znode: its data and its znode version (partition_epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int


class ClusterView:
    """A read-only kazoo session on a cluster's ZooKeeper chroot."""

    def __init__(self, connect: str, *, timeout: float = 10.0) -> None:
        self.client = KazooClient(hosts=connect, timeout=timeout)
        self.timeout = timeout
        self._histories: list[tuple[str, int, list[PartitionStateVersion]]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> ClusterView:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> ClusterView:
        self.client.start(timeout=10)
        return self

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def _json(self, path: str) -> tuple[Any, Any] | None:
        try:
            # with a deadline: kazoo's blocking get waits forever while its connection is down
            data, stat = self.client.get_async(path).get(timeout=self.timeout)
        except NoNodeError:
            return None
        return (json.loads(data) if data else None), stat

    # -- reads -------------------------------------------------------------------------------------
    def controller_id(self) -> int | None:
        found = self._json("/controller")
        return None if found is None or found[0] is None else int(found[0]["brokerid"])

    def live_brokers(self) -> set[int]:
        try:
            children = self.client.get_children_async("/brokers/ids").get(timeout=self.timeout)
            return {int(child) for child in children}
        except NoNodeError:
            return set()

    def assignment(self, topic: str) -> dict[int, list[int]]:
        found = self._json(f"/brokers/topics/{topic}")
        if found is None or found[0] is None:
            return {}
        return {int(p): list(replicas) for p, replicas in found[0].get("partitions", {}).items()}

    def partition_state(self, topic: str, partition: int) -> PartitionStateVersion | None:
        found = self._json(f"/brokers/topics/{topic}/partitions/{partition}/state")
        if found is None or found[0] is None:
            return None
        data, stat = found
        return PartitionStateVersion(
            leader=int(data["leader"]),
            leader_epoch=int(data["leader_epoch"]),
            isr=tuple(int(b) for b in data["isr"]),
            controller_epoch=int(data.get("controller_epoch", 0)),
            partition_epoch=stat.version,
        )

    def leader_of(self, topic: str, partition: int) -> int | None:
        state = self.partition_state(topic, partition)
        return None if state is None else state.leader

    def isr_of(self, topic: str, partition: int) -> set[int]:
        state = self.partition_state(topic, partition)
        return set() if state is None else set(state.isr)

    # -- waits -------------------------------------------------------------------------------------
    @staticmethod
    def wait_for(
        condition: Callable[[], T | None],
        what: str,
        timeout: float = 30.0,
        seen: Callable[[], object] | None = None,
    ) -> T:
        """Poll ``condition`` until it returns a truthy value (returned); `ClusterWaitTimeout` after
        ``timeout`` seconds, quoting ``seen()`` (what the cluster looked like) when given."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() >= deadline:
                last = f"; last seen: {seen()!r}" if seen is not None else ""
                raise ClusterWaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}{last}")
            time.sleep(POLL_INTERVAL)

    def wait_for_leader(
        self, topic: str, partition: int, *, not_in: AbstractSet[int] = frozenset(), timeout: float = 30.0
    ) -> PartitionStateVersion:
        """Wait until the partition has a leader (not -1, not one of ``not_in``); return its state."""

        def ready() -> PartitionStateVersion | None:
            state = self.partition_state(topic, partition)
            if state is not None and state.leader >= 0 and state.leader not in not_in:
                return state
            return None

        return self.wait_for(
            ready,
            f"a leader of {topic}-{partition} outside {sorted(not_in)}",
            timeout,
            lambda: self.partition_state(topic, partition),
        )

    def wait_for_isr(
        self, topic: str, partition: int, isr: set[int], *, timeout: float = 30.0
    ) -> PartitionStateVersion:
        """Wait until the partition's ISR is exactly ``isr`` with a live leader; return its state."""

        def ready() -> PartitionStateVersion | None:
            state = self.partition_state(topic, partition)
            if state is not None and state.leader >= 0 and set(state.isr) == set(isr):
                return state
            return None

        return self.wait_for(
            ready,
            f"ISR {sorted(isr)} of {topic}-{partition}",
            timeout,
            lambda: self.partition_state(topic, partition),
        )

    def wait_for_full_isr(self, topic: str, partitions: int, *, timeout: float = 30.0) -> None:
        """Wait until every partition of ``topic`` has all of its assigned replicas in the ISR."""
        self.wait_for(lambda: self.assignment(topic), f"the assignment of {topic}", timeout)
        for partition, replicas in sorted(self.assignment(topic).items())[:partitions]:
            self.wait_for_isr(topic, partition, set(replicas), timeout=timeout)

    def wait_for_deregistered(self, broker_id: int, *, timeout: float = 60.0) -> None:
        """Wait until /brokers/ids/<broker_id> is gone (a SIGKILLed broker's session expired). A
        broker started again before that waits for it itself; this is for tests about the expiry."""
        self.wait_for(lambda: broker_id not in self.live_brokers(), f"/brokers/ids/{broker_id} gone", timeout)

    def wait_for_controller(self, *, not_in: AbstractSet[int] = frozenset(), timeout: float = 30.0) -> int:
        def ready() -> int | None:
            controller = self.controller_id()
            return controller if controller is not None and controller not in not_in else None

        return self.wait_for(ready, f"a controller outside {sorted(not_in)}", timeout, self.controller_id)

    # -- history -----------------------------------------------------------------------------------
    def watch_partition_states(self, topic: str, partition: int) -> list[PartitionStateVersion]:
        """Start recording every version of the partition's state znode this session is told of
        (a ZooKeeper data watch); the returned list grows as versions are seen."""
        history: list[PartitionStateVersion] = []
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"

        def on_change(data: bytes | None, stat: Any, event: Any = None) -> None:
            if not data or stat is None:
                return
            state = json.loads(data)
            with self._lock:
                history.append(
                    PartitionStateVersion(
                        leader=int(state["leader"]),
                        leader_epoch=int(state["leader_epoch"]),
                        isr=tuple(int(b) for b in state["isr"]),
                        controller_epoch=int(state.get("controller_epoch", 0)),
                        partition_epoch=stat.version,
                    )
                )

        self.client.DataWatch(path, on_change)
        self._histories.append((topic, partition, history))
        return history


def leaders_by_epoch(history: list[PartitionStateVersion]) -> dict[int, set[int]]:
    """leader_epoch -> the set of leaders (>= 0) any state version named for that epoch."""
    found: dict[int, set[int]] = {}
    for version in history:
        if version.leader >= 0:
            found.setdefault(version.leader_epoch, set()).add(version.leader)
    return found

"""A reassignment cancelled (AlterPartitionReassignments with null replicas) while the controller is
taking it up, against a real ZooKeeper: the cancel waits for the controller's event to end and then
undoes the reassignment the event started, instead of withdrawing a request the controller has
already read and leaving its start without one (the partition then stayed "adding" forever)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest

from kctl.broker.apis.alter_partition_reassignments import _submit
from kctl.broker.controller.controller import Controller
from kctl.testing import ZooKeeperServer
from kctl.zk.model import BrokerRegistration
from kctl.zk.zookeeper import ZooKeeperRegistry

pytestmark = pytest.mark.zk

KEY = ("moving", 0)


@pytest.fixture
def registries(zookeeper: ZooKeeperServer) -> Iterator[tuple[ZooKeeperRegistry, ZooKeeperRegistry]]:
    """Brokers 1 and 2, each with its own ZooKeeper session."""
    connect = zookeeper.connect_string(zookeeper.chroot())
    with (
        ZooKeeperRegistry(connect, connection_timeout_ms=10_000) as one,
        ZooKeeperRegistry(connect, connection_timeout_ms=10_000) as two,
    ):
        one.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
        two.register_broker(BrokerRegistration(2, "127.0.0.1", 9093))
        yield one, two


class _WatchedLock:
    """The controller's lock, telling when someone else waits for it."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.waited = threading.Event()

    def __enter__(self) -> object:
        self.waited.set()
        return self.lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.lock.__exit__(*exc)


def test_a_cancel_while_the_controller_starts_the_reassignment_undoes_it(
    registries: tuple[ZooKeeperRegistry, ZooKeeperRegistry], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, _ = registries
    one.create_topic("moving", {0: (2,)}, {})
    controller = Controller(1, one)
    controller.process({"controller"})
    assert controller.active
    one.admin_requests.request_reassignments({KEY: (1, 2)})

    # the controller reads the request and stops just before it writes the start into the topic
    about_to_write, go_on = threading.Event(), threading.Event()
    write = one.set_topic_assignment

    def held_write(*args: Any, **kwargs: Any) -> Any:
        about_to_write.set()
        assert go_on.wait(30)
        return write(*args, **kwargs)

    monkeypatch.setattr(one, "set_topic_assignment", held_write)
    with ThreadPoolExecutor(2) as pool:
        event = pool.submit(controller.process, {"admin"})
        assert about_to_write.wait(30)
        lock = _WatchedLock(controller._lock)
        monkeypatch.setattr(controller, "_lock", lock)
        cancel = pool.submit(_submit, SimpleNamespace(registry=one, controller=controller), {}, [KEY])
        deadline = time.monotonic() + 30
        while not (lock.waited.is_set() or cancel.done()) and time.monotonic() < deadline:
            time.sleep(0.01)
        go_on.set()
        assert event.result(30) is False
        assert cancel.result(30) == {KEY: (0, None)}
    monkeypatch.setattr(one, "set_topic_assignment", write)

    for _ in range(3):  # the request back to the original replicas completes at once: 2 is the ISR
        controller.process({"admin"})
    record = one.get_topic("moving")
    assert record is not None
    assert (record.assignment[0], record.adding_replicas, record.removing_replicas) == ((2,), {}, {})
    assert one.admin_requests.reassignment_requests() == {}
    assert one.admin_requests.ongoing_reassignments({"moving": record.assignment}) == {}

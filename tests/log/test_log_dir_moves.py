"""Moving a partition between a broker's log directories (issue 16 §2, AlterReplicaLogDirs): the log
manager's copy-then-swap in process (every record kept, the old directory gone, a crash's leftovers
cleaned at load), and a real broker with two log.dirs moving a partition with `kctl broker log-dirs
move --execute` while a librdkafka producer keeps producing to it — nothing lost, the partition read
back whole from its new directory."""

from __future__ import annotations

import json
import os
import shutil
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import kctl as run_kctl
from conftest import make_batch

from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.log.config import LogConfig
from kctl.log.dir_move import LogDirNotFoundError
from kctl.log.manager import LogManager
from kctl.log.naming import FUTURE_DIR_SUFFIX, partition_dir_name
from kctl.records.reader import iter_batches

kctl = partial(run_kctl, columns=250)  # the move plans' wide tables

if TYPE_CHECKING:
    from kctl.testing import BrokerProcess

TP = TopicPartition("moving", 0)


def _offsets(log: Any) -> list[int]:
    """Every record offset of ``log``, read through its segments."""
    out: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 1 << 20, max_offset=log.log_end_offset)
        assert region is not None
        with region:
            data = os.pread(region.fd, region.size, region.position)
        for batch in iter_batches(data):
            out += [r.offset for r in batch.records if r.offset >= offset]
        offset = out[-1] + 1
    return out


def test_a_log_moves_while_it_is_appended_to(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    manager = LogManager([a, b], LogConfig(segment_bytes=4096), broker_id=0)
    log = manager.get_or_create_log(TP)
    source = log.directory
    for _ in range(30):
        log.append(make_batch(5))
    destination = b if source.parent == a.resolve() else a
    with pytest.raises(LogDirNotFoundError):
        manager.begin_move(TP, tmp_path / "elsewhere")
    assert manager.begin_move(TP, source.parent) is None  # already there
    move = manager.begin_move(TP, destination)
    assert move is not None
    manager.copy_for_move(move)
    for _ in range(10):  # appended after the bulk copy: the last pass brings them
        log.append(make_batch(5))
    manager.copy_for_move(move)
    log.append(make_batch(5))
    new = manager.complete_move(move)
    assert manager.get_log(TP) is new and new.directory == destination.resolve() / partition_dir_name(TP)
    assert not source.exists() and not move.future.exists()
    assert len(new.segments) > 5
    assert _offsets(new) == list(range(205))
    assert new.append(make_batch(5)).first_offset == 205
    manager.close()
    reopened = LogManager([a, b], LogConfig(segment_bytes=4096), broker_id=0)
    log = reopened.get_log(TP)
    assert log is not None and log.directory.parent == destination.resolve()
    assert _offsets(log) == list(range(210)) and log.recovery_plan == []
    reopened.close()


def test_a_crash_mid_move_leaves_the_log_where_it_was(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    dup = TopicPartition("dup", 0)
    manager = LogManager([a, b], broker_id=0)
    log = manager.get_or_create_log(TP)
    log.append(make_batch(7))
    manager.get_or_create_log(dup).append(make_batch(3))
    other = b if log.directory.parent == a.resolve() else a
    move = manager.begin_move(TP, other)
    assert move is not None and move.future.name.endswith(FUTURE_DIR_SUFFIX)
    manager.copy_for_move(move)
    dup_dir = manager.get_log(dup).directory  # type: ignore[union-attr]
    manager.close()  # a crash before the swap leaves the future directory behind
    # a crash after a move's rename, before the old copy was deleted, leaves two identical copies
    twin = (b if dup_dir.parent == a.resolve() else a) / dup_dir.name
    shutil.copytree(dup_dir, twin)
    again = LogManager([a, b], broker_id=0)
    assert not move.future.exists()
    assert again.get_log(TP).log_end_offset == 7  # type: ignore[union-attr]
    assert again.get_log(dup).log_end_offset == 3  # type: ignore[union-attr]
    assert [d for d in (a, b) if (d / dup_dir.name).exists()] == [a]  # the first directory's kept
    again.close()


@pytest.fixture(scope="module")
def two_dir_broker(module_broker_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess:
    base = tmp_path_factory.mktemp("two-dirs")
    broker: BrokerProcess = module_broker_factory({"log.dirs": f"{base / 'one'},{base / 'two'}"})
    return broker


def test_kctl_moves_a_partition_while_it_serves(two_dir_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer

    b = two_dir_broker.bootstrap
    with AdminClient(b) as admin:
        admin.create_topics([NewTopic("moving", 1, 1, {"segment.bytes": "65536"})])[0].raise_for_error()
        [source] = [d for d in admin.describe_log_dirs([0])[0] if d.replicas]
        [target] = [d.path for d in admin.describe_log_dirs([0])[0] if not d.replicas]
    producer = Producer({"bootstrap.servers": b, "linger.ms": 2, "enable.idempotence": True})
    for i in range(3000):
        producer.produce("moving", f"before-{i}".encode() * 20, partition=0)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0

    plan = kctl(
        "broker", "log-dirs", "move", "--broker", "0", "-t", "moving", "--to", target, "-b", b, "-f", "json"
    )
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout) == [
        {
            "broker": 0,
            "topic": "moving",
            "partition": 0,
            "from": source.path,
            "to": target,
            "status": "planned",
        }
    ]
    assert "--execute" in plan.stderr

    errors: list[str] = []
    done = threading.Event()

    def keep_producing() -> None:  # the partition keeps taking writes during the move
        def report(error: Any, _message: Any) -> None:
            if error is not None:
                errors.append(str(error))

        for i in range(2000):
            producer.produce("moving", f"during-{i}".encode(), partition=0, on_delivery=report)
            producer.poll(0)
        producer.flush(60)
        done.set()

    writer = threading.Thread(target=keep_producing)
    writer.start()
    moved = kctl(
        "broker", "log-dirs", "move", "--broker", "0", "-t", "moving", "--to", target,
        "--execute", "--wait", "60", "-b", b, "-f", "json",
    )  # fmt: skip
    writer.join(120)
    assert moved.returncode == 0, moved.stderr + moved.stdout
    assert json.loads(moved.stdout)[0]["status"] == "moved"
    assert done.is_set() and errors == []

    described = kctl("broker", "log-dirs", "describe", "-t", "moving", "-b", b, "-f", "json")
    assert described.returncode == 0, described.stderr
    by_dir = {d["log_dir"]: d["replicas"] for d in json.loads(described.stdout)}
    assert by_dir[source.path] == []
    assert [(r["partition"], r["is_future"]) for r in by_dir[target]] == [(0, False)]
    assert not (Path(source.path) / "moving_0").exists() and (Path(target) / "moving_0").is_dir()

    consumer = Consumer({"bootstrap.servers": b, "group.id": "mover", "auto.offset.reset": "earliest"})
    consumer.assign([__import__("confluent_kafka").TopicPartition("moving", 0, 0)])
    values = []
    try:
        while len(values) < 5000:
            message = consumer.poll(10)
            assert message is not None, f"read {len(values)} of 5000"
            assert message.error() is None
            values.append(message.value())
    finally:
        consumer.close()
    assert values[:3000] == [f"before-{i}".encode() * 20 for i in range(3000)]
    assert values[3000:] == [f"during-{i}".encode() for i in range(2000)]

    again = kctl(
        "broker", "log-dirs", "move", "--broker", "0", "-t", "moving", "--to", target, "--execute", "-b", b
    )
    assert again.returncode == 0 and "in place" in again.stdout
    nowhere = kctl("broker", "log-dirs", "move", "--broker", "0", "-t", "moving", "--to", "/nope", "-b", b)
    assert nowhere.returncode == 3
    with AdminClient(b) as admin:
        codes = admin.alter_replica_log_dirs(
            0, {TopicPartition("moving", 0): "/nope", TopicPartition("absent", 0): target}
        )
    assert codes == {TopicPartition("moving", 0): 57, TopicPartition("absent", 0): 9}


def _placement(bootstrap: str) -> dict[str, list[str]]:
    with AdminClient(bootstrap) as admin:
        dirs = admin.describe_log_dirs([0])[0]
    return {d.path: sorted(str(r.topic_partition) for r in d.replicas) for d in dirs}


def test_move_refuses_a_broker_dir_or_partition_that_is_not_there(two_dir_broker: BrokerProcess) -> None:
    """Issue 25 audit: a broker that is not in the cluster was retried until default.api.timeout.ms
    (60 s) before exit 3; it is refused at once. An unknown dir or partition was refused already
    (exit 3); nothing moves in any of these cases."""
    import time

    b = two_dir_broker.bootstrap
    with AdminClient(b) as admin:
        admin.create_topics([NewTopic("staying", 2, 1)])[0].raise_for_error()
        admin.cluster.wait_for_topics(["staying"], timeout=30)
    before = _placement(b)
    [other] = [path for path, replicas in before.items() if "staying-0" not in replicas]
    move = partial(kctl, "broker", "log-dirs", "move", "-t", "staying", "--execute", "-b", b)
    started = time.monotonic()
    unknown = move("--broker", "7", "--to", other)
    assert unknown.returncode == 3, unknown.stderr
    assert "no broker 7 in the cluster" in unknown.stderr and time.monotonic() - started < 15
    for args, message in (
        (["--to", "/nope"], "/nope is not a log dir of broker 0"),
        (["--to", other, "-p", "5"], "broker 0 hosts no replica of staying-5"),
    ):
        refused = move("--broker", "0", *args)
        assert refused.returncode == 3 and message in refused.stderr, refused.stderr
    assert _placement(b) == before

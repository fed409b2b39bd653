"""kctl.client.admin.partition_sizes without a broker: the one definition of a partition's size (at
its leader) that `kctl topic describe` and `kctl partition reassign` share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kctl.client import TopicPartition
from kctl.client.admin import BrokerLogDirs, LogDirDescription, ReplicaLogInfo
from kctl.client.admin.partition_sizes import leader_partition_sizes, leaders_of, partition_sizes
from kctl.client.admin.results import PartitionInfo, TopicDescription
from kctl.client.errors import BrokerNotAnsweringError, KafkaError
from kctl.protocol import ErrorCode

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
TOPIC = TopicDescription(
    "t",
    partitions=(
        PartitionInfo(0, 1, 0, (1, 2), (1, 2)),
        PartitionInfo(1, 2, 0, (2, 1), (2, 1)),
        PartitionInfo(2, -1, 0, (3,), (), (3,)),  # offline: no leader to ask
    ),
)
SILENT = BrokerNotAnsweringError("broker 2 has not answered for 3.0s", node_id=2)


class FakeAdmin:
    def __init__(self, answers: dict[int, BrokerLogDirs] | None = None, error: KafkaError | None = None):
        self.answers = answers or {}
        self.error = error
        self.asked: list[tuple[list[int], list[TopicPartition]]] = []

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        return [
            TOPIC if name == "t" else TopicDescription(name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for name in names
        ]

    def log_dirs_by_broker(self, brokers: Sequence[int], tps: Sequence[TopicPartition]) -> dict[int, Any]:
        self.asked.append((list(brokers), list(tps)))
        if self.error is not None:
            raise self.error
        return self.answers


def test_leaders_of_groups_the_led_partitions_and_skips_offline_ones_and_failed_topics() -> None:
    missing = TopicDescription("gone", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert leaders_of([TOPIC, missing]) == {1: [T0], 2: [T1]}
    assert leaders_of([TOPIC], only={T1, T2}) == {2: [T1]}


def test_a_partition_counts_its_leaders_copy_only() -> None:
    both = (ReplicaLogInfo(T0, 512), ReplicaLogInfo(T1, 999))  # 1 follows T1: not its size
    admin = FakeAdmin(
        {
            1: BrokerLogDirs(1, (LogDirDescription(broker_id=1, path="/a", replicas=both),)),
            2: BrokerLogDirs(
                2,
                (
                    LogDirDescription(broker_id=2, path="/b", replicas=(ReplicaLogInfo(T1, 256),)),
                    LogDirDescription(
                        broker_id=2, path="/c", replicas=(ReplicaLogInfo(T1, 7, is_future=True),)
                    ),
                ),
            ),
        }
    )
    found = leader_partition_sizes(admin, {1: [T0], 2: [T1]})  # type: ignore[arg-type]
    assert found.sizes == {T0: 512, T1: 256}
    assert found.failed == {} and found.offline_dirs == []
    assert admin.asked == [([1, 2], [T0, T1])]  # one round for every leader


def test_a_leader_without_sizes_and_an_offline_log_dir_are_reported() -> None:
    offline = LogDirDescription(broker_id=1, path="/bad", error_code=ErrorCode.KAFKA_STORAGE_ERROR)
    admin = FakeAdmin({1: BrokerLogDirs(1, (offline,)), 2: BrokerLogDirs(2, error=SILENT)})
    found = leader_partition_sizes(admin, {1: [T0], 2: [T1]})  # type: ignore[arg-type]
    assert found.sizes == {}
    assert found.failed == {2: SILENT}
    assert found.offline_dirs == [(1, offline)]


def test_no_leader_asks_nothing() -> None:
    admin = FakeAdmin()
    assert leader_partition_sizes(admin, {}).sizes == {}  # type: ignore[arg-type]
    assert admin.asked == []


def test_partition_sizes_finds_the_leaders_and_blames_them_all_when_nothing_can_be_asked() -> None:
    admin = FakeAdmin({1: BrokerLogDirs(1, (LogDirDescription(1, "/a", (ReplicaLogInfo(T0, 5),)),))})
    assert partition_sizes(admin, [T0, T2]).sizes == {T0: 5}  # type: ignore[arg-type]
    assert admin.asked == [([1], [T0])]
    error = KafkaError("no broker answered")
    failing = FakeAdmin(error=error)
    found = partition_sizes(failing, [T0, T1])  # type: ignore[arg-type]
    assert found.sizes == {} and found.failed == {1: error, 2: error}

"""What `kctl topic describe` reports (kctl.client.admin.topic_report) without a broker: the health
filters, and how a leader that did not answer leaves its partitions marked rather than failing the
whole answer. The same against real brokers, killed: tests/cli/test_cli_cluster_health.py."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kctl.client import TopicPartition
from kctl.client.admin import BrokerLogDirs, LogDirDescription, ReplicaLogInfo
from kctl.client.admin.results import ConfigEntry, PartitionInfo, TopicConfigs, TopicDescription
from kctl.client.admin.topic_report import HealthFilter, topic_report
from kctl.client.consumer.offsets import OffsetResult
from kctl.client.errors import BrokerNotAnsweringError
from kctl.protocol import ErrorCode
from kctl.protocol.configs import ConfigSource

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
TOPIC = TopicDescription(
    "t",
    partitions=(
        PartitionInfo(0, 1, 0, (1, 2, 3), (1, 2)),  # led by 1, under-replicated
        PartitionInfo(1, 2, 0, (2, 1, 3), (2, 1, 3)),  # led by 2, which does not answer
        PartitionInfo(2, -1, 0, (3,), (), (3,)),  # offline
    ),
)
REFUSED = "cannot connect to 127.0.0.1:9093: Connection refused"


class FakeCluster:
    def not_answering(self) -> dict[int, str]:
        return {2: REFUSED, 3: REFUSED}  # 3 leads nothing here: it leaves no gap


class FakeAdmin:
    """The calls topic_report makes, answered as brokers 1 (up) and 2 (silent) would."""

    cluster = FakeCluster()

    def __init__(self) -> None:
        self.asked: list[list[TopicPartition]] = []

    def list_offsets(self, tps: Iterable[TopicPartition], spec: str) -> dict[TopicPartition, OffsetResult]:
        wanted = list(tps)
        self.asked.append(wanted)
        offset = 3 if spec == "earliest" else 10
        return {
            tp: OffsetResult(tp, offset)
            if tp != T1
            else OffsetResult(tp, error_code=ErrorCode.NETWORK_EXCEPTION, error_message=REFUSED)
            for tp in wanted
        }

    def describe_topic_configs(self, names: Sequence[str]) -> list[TopicConfigs]:
        entry = ConfigEntry("min.insync.replicas", "3", ConfigSource.DYNAMIC_TOPIC_CONFIG, False, False)
        return [TopicConfigs(name, entries=(entry,)) for name in names]

    def log_dirs_by_broker(self, brokers: Sequence[int], tps: Sequence[TopicPartition]) -> dict[int, Any]:
        assert list(brokers) == [1, 2]
        silent = BrokerNotAnsweringError(f"broker 2 has not answered for 3.0s: {REFUSED}", node_id=2)
        replicas = (ReplicaLogInfo(T0, 512), ReplicaLogInfo(T1, 256))  # 1 follows T1: not its size
        return {
            1: BrokerLogDirs(1, (LogDirDescription(broker_id=1, path="/data", replicas=replicas),)),
            2: BrokerLogDirs(2, error=silent),
        }


def report(health: HealthFilter | None = None) -> Any:
    return topic_report(FakeAdmin(), [TOPIC], health)  # type: ignore[arg-type]


def test_a_silent_leader_leaves_its_partitions_marked_and_the_rest_answered() -> None:
    result = report()
    assert result.not_answering == {2: REFUSED} and result.incomplete
    assert result.warnings == []  # the silent leader is named once by the caller, not per partition
    [document] = result.documents
    rows = {p["partition"]: p for p in document["partitions"]}
    columns = ("leader", "available", "log_start_offset", "high_watermark", "size")
    assert [tuple(rows[p][c] for c in columns) for p in (0, 1)] == [
        (1, True, 3, 10, 512),
        (2, False, None, None, None),
    ]
    assert (rows[2]["leader"], rows[2]["available"], rows[2]["high_watermark"]) == (-1, False, None)


def test_the_offline_partition_is_not_asked() -> None:
    admin = FakeAdmin()
    topic_report(admin, [TOPIC])  # type: ignore[arg-type]
    assert admin.asked == [[T0, T1], [T0, T1]]


def test_health_filters_pick_partitions_and_count_them() -> None:
    def picked(health: HealthFilter) -> tuple[list[int], int]:
        result = report(health)
        return [p["partition"] for d in result.documents for p in d["partitions"]], result.matched

    assert picked(HealthFilter(under_replicated=True)) == ([0, 2], 2)
    assert picked(HealthFilter(unavailable=True)) == ([1, 2], 2)  # no leader, or one not answering
    assert picked(HealthFilter(under_min_isr=True)) == ([0, 2], 2)  # min.insync.replicas=3
    assert picked(HealthFilter(under_replicated=True, unavailable=True)) == ([0, 1, 2], 3)
    assert picked(HealthFilter()) == ([0, 1, 2], 0)  # no filter: everything, nothing "found"

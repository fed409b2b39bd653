"""Offsets of a group that has been empty longer than offsets.retention.minutes expire: the
coordinator writes tombstones for them (and the group) to __consumer_offsets and forgets them."""

from __future__ import annotations

from types import SimpleNamespace

from kctl.broker.group.coordinator import GroupCoordinator
from kctl.broker.group.membership import Group
from kctl.broker.group.records import GroupKey, OffsetKey, OffsetValue, decode_key
from kctl.log.clock import ManualClock
from kctl.records.reader import iter_batches

MINUTE = 60_000


class RecordingReplicas:
    def __init__(self) -> None:
        self.appended: list[tuple[object, bytes]] = []
        self.partitions: dict[object, object] = {}

    def append(self, tp: object, records: bytes, **_options: object) -> SimpleNamespace:
        self.appended.append((tp, records))
        return SimpleNamespace(first_offset=len(self.appended) - 1)  # the AppendInfo the coordinator reads


def coordinator(clock: ManualClock) -> tuple[GroupCoordinator, RecordingReplicas]:
    config = {
        "offsets.topic.num.partitions": 1,
        "group.min.session.timeout.ms": 1000,
        "group.max.session.timeout.ms": 60000,
        "group.initial.rebalance.delay.ms": 0,
        "offset.metadata.max.bytes": 4096,
        "group.max.size": 100,
        "offsets.retention.minutes": 10,
    }
    replicas = RecordingReplicas()
    broker = SimpleNamespace(config=config, clock=clock, replicas=replicas, broker_id=0)
    groups = GroupCoordinator(broker)
    groups.loaded.add(0)
    return groups, replicas


def test_offsets_of_a_group_empty_past_retention_expire() -> None:
    clock = ManualClock(1_000 * MINUTE)
    groups, replicas = coordinator(clock)
    old = Group("old", state_timestamp=clock.time_ms() - 11 * MINUTE)
    old.offsets[("t", 0)] = OffsetValue(5, -1, "", clock.time_ms() - 11 * MINUTE)
    recent = Group("recent", state_timestamp=clock.time_ms() - 11 * MINUTE)
    recent.offsets[("t", 0)] = OffsetValue(7, -1, "", clock.time_ms() - 1 * MINUTE)  # committed lately
    groups.groups.update(old=old, recent=recent)
    assert groups.offsets.expire_offsets() == 1
    assert set(groups.groups) == {"recent"}
    ((_tp, data),) = replicas.appended
    records = [r for batch in iter_batches(data) for r in batch.records]
    assert {decode_key(r.key) for r in records} == {OffsetKey("old", "t", 0), GroupKey("old")}
    assert all(r.value is None for r in records)  # tombstones
    clock.advance(10 * MINUTE)
    assert groups.offsets.expire_offsets() == 1 and not groups.groups


def test_groups_with_members_never_expire() -> None:
    clock = ManualClock(1_000 * MINUTE)
    groups, replicas = coordinator(clock)
    busy = Group("busy", state_timestamp=0)
    busy.offsets[("t", 0)] = OffsetValue(1, -1, "", 0)
    busy.members["m"] = SimpleNamespace()  # type: ignore[assignment]
    groups.groups["busy"] = busy
    assert groups.offsets.expire_offsets() == 0 and replicas.appended == []

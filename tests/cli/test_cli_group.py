"""`kctl group list|describe|rewind|delete` run as real processes against a real broker process, with
real group members (kctl's GroupConsumer, confluent-kafka) committing and consuming."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import running_broker, unique

from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.client.group.consumer import GroupConsumer
from kctl.testing import BrokerProcess

pytestmark = pytest.mark.timeout(180)

BROKER_PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "5",
}
MEMBER = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": "false",
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "200",
    "fetch.max.wait.ms": "100",
}
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, BROKER_PROPERTIES, "cli-group") as process:
        yield process


def kctl(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "KCTL_BOOTSTRAP_SERVER"}
    return subprocess.run(
        [sys.executable, "-m", "kctl", "group", *args, "-b", broker.bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environment, "COLUMNS": "250"},
    )


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.stdout, result.stderr
    return json.loads(result.stdout)


def make_topic(
    broker: BrokerProcess, name: str, partitions: int, per_partition: int, timestamps=None
) -> None:
    with AdminClient(broker.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, partitions, 1)])
        result.raise_for_error()
        admin.cluster.wait_for_topics([name], timeout=TIMEOUT)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for p in range(partitions):
        for i in range(per_partition):
            kwargs = {"timestamp": timestamps(p, i)} if timestamps else {}
            producer.produce(name, value=b"%d-%d" % (p, i), partition=p, **kwargs)
    assert producer.flush(30) == 0


def member(broker: BrokerProcess, group: str, topic: str, count: int) -> GroupConsumer:
    """A kctl group member that has consumed ``count`` records (and committed nothing yet)."""
    consumer = GroupConsumer(broker.bootstrap, {**MEMBER, "group.id": group, "client.id": "cli-test"})
    consumer.subscribe([topic])
    records: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    while len(records) < count:
        assert time.monotonic() < deadline, f"consumed only {len(records)} records"
        records += consumer.poll(0.2)
    return consumer


def committed(broker: BrokerProcess, group: str) -> dict[tuple[str, int], int | None]:
    [document] = as_json(kctl(broker, "describe", group, "-f", "json"))
    return {(o["topic"], o["partition"]): o["committed_offset"] for o in document["offsets"]}


def consume_from(broker: BrokerProcess, group: str, topic: str, expected: int) -> dict[int, list[int]]:
    """Offsets a confluent-kafka member of ``group`` reads, per partition."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    seen: dict[int, list[int]] = {}
    deadline = time.monotonic() + TIMEOUT
    try:
        while sum(len(v) for v in seen.values()) < expected:
            assert time.monotonic() < deadline, f"read only {seen}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert not message.error(), message.error()
            seen.setdefault(message.partition(), []).append(message.offset())
    finally:
        consumer.close()
    return seen


# -- list and describe -----------------------------------------------------------------------------
def test_list_and_describe_show_members_offsets_and_lag(broker: BrokerProcess) -> None:
    topic, group = unique("lag"), unique("group")
    make_topic(broker, topic, 3, 10)
    consumer = member(broker, group, topic, 30)
    try:
        consumer.commit({TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 4})
        listed = as_json(kctl(broker, "list", "-f", "json"))
        [row] = [g for g in listed if g["group"] == group]
        assert row | {"coordinator": 0} == {
            "group": group,
            "state": "Stable",
            "protocol_type": "consumer",
            "assignor": "range",
            "members": 1,
            "coordinator": 0,
        }
        assert group not in [
            g["group"] for g in as_json(kctl(broker, "list", "--state", "Empty", "-f", "json"))
        ]
        assert group in [g["group"] for g in as_json(kctl(broker, "list", "--state", "stable", "-f", "json"))]

        [document] = as_json(kctl(broker, "describe", group, "-f", "json"))
        assert (document["state"], document["assignor"], document["member_count"], document["total_lag"]) == (
            "Stable",
            "range",
            1,
            6,
        )
        [m] = document["members"]
        assert m["member_id"] == consumer.member_id and m["client_id"] == "cli-test"
        assert m["assignment"] == [{"topic": topic, "partitions": [0, 1, 2]}]
        assert m["topics"] == [topic]
        rows = {o["partition"]: o for o in document["offsets"]}
        assert [
            (rows[p]["committed_offset"], rows[p]["log_end_offset"], rows[p]["lag"]) for p in range(3)
        ] == [
            (10, 10, 0),
            (4, 10, 6),
            (None, 10, None),
        ]
        assert all(o["member_id"] == consumer.member_id for o in document["offsets"])

        table = kctl(broker, "describe", group)
        assert table.returncode == 0, table.stderr
        lines = [line.split() for line in table.stdout.splitlines() if line.startswith(group)]
        assert [group, topic, "1", "4", "10", "6", consumer.member_id] == lines[-2][:7]
    finally:
        consumer.close()


def test_describe_several_groups_and_missing_ones(broker: BrokerProcess) -> None:
    topic, first, second = unique("multi"), unique("group"), unique("group")
    make_topic(broker, topic, 1, 5)
    for group, offset in ((first, 2), (second, 5)):
        consumer = member(broker, group, topic, 5)
        consumer.commit({TopicPartition(topic, 0): offset})
        consumer.close()
    documents = as_json(kctl(broker, "describe", first, second, "-f", "json"))
    assert [(d["group"], d["state"], d["total_lag"]) for d in documents] == [
        (first, "Empty", 3),
        (second, "Empty", 0),
    ]
    jsonl = kctl(broker, "describe", first, second, "-f", "jsonl")
    assert [json.loads(line)["group"] for line in jsonl.stdout.splitlines()] == [first, second]
    everything = as_json(kctl(broker, "describe", "--all", "-f", "json"))
    assert {first, second} <= {d["group"] for d in everything}

    missing = kctl(broker, "describe", "no-such-group")
    assert missing.returncode == 3 and "does not exist" in missing.stderr
    partly = kctl(broker, "describe", first, "no-such-group", "-f", "json")
    assert partly.returncode == 1 and [d["group"] for d in json.loads(partly.stdout)] == [first]


# -- rewind ----------------------------------------------------------------------------------------
def test_rewind_is_refused_while_members_are_active_and_delete_too(broker: BrokerProcess) -> None:
    topic, group = unique("busy"), unique("group")
    make_topic(broker, topic, 2, 3)
    consumer = member(broker, group, topic, 6)
    try:
        consumer.commit()
        result = kctl(broker, "rewind", group, "--to-earliest", "--all-topics", "--execute")
        assert result.returncode == 1
        assert consumer.member_id in result.stderr and "active member" in result.stderr
        assert committed(broker, group) == {(topic, 0): 3, (topic, 1): 3}, "nothing changed"
        refused = kctl(broker, "delete", group)
        assert refused.returncode == 1
        assert "NON_EMPTY_GROUP" in refused.stderr and consumer.member_id in refused.stderr
    finally:
        consumer.close()


def test_rewind_plan_then_execute_then_resume_exactly_there(broker: BrokerProcess) -> None:
    topic, group = unique("rewind"), unique("group")
    make_topic(broker, topic, 3, 10)
    consumer = member(broker, group, topic, 30)
    consumer.commit({TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 8})
    consumer.close()

    plan = kctl(broker, "rewind", group, "--to-earliest", "-f", "json")  # the user's example: all topics
    assert plan.returncode == 0, plan.stderr
    rows = {r["partition"]: r for r in json.loads(plan.stdout)}
    assert {
        p: (r["current_offset"], r["new_offset"], r["lag_before"], r["lag_after"], r["status"])
        for p, r in rows.items()
    } == {
        0: (10, 0, 0, 10, "planned"),
        1: (8, 0, 2, 10, "planned"),
    }
    assert "dry run" in plan.stderr
    assert committed(broker, group) == {(topic, 0): 10, (topic, 1): 8}, "a plan changes nothing"

    # partition 0 to offset 4, partition 1 back by 2, partition 2 (nothing committed) to 7
    for args in (
        ["--to-offset", "4", "--topic", f"{topic}:0"],
        ["--shift-by", "-2", "--topic", f"{topic}:1"],
        ["--to-offset", "7", "--topic", f"{topic}:2"],
    ):
        done = kctl(broker, "rewind", group, *args, "--execute", "-f", "json")
        assert done.returncode == 0, done.stderr
        assert [r["status"] for r in json.loads(done.stdout)] == ["committed"]
    assert committed(broker, group) == {(topic, 0): 4, (topic, 1): 6, (topic, 2): 7}
    seen = consume_from(broker, group, topic, 6 + 4 + 3)
    assert {p: offsets for p, offsets in sorted(seen.items())} == {
        0: list(range(4, 10)),
        1: list(range(6, 10)),
        2: list(range(7, 10)),
    }


def test_rewind_refuses_an_offset_past_the_log_end(broker: BrokerProcess, tmp_path: Path) -> None:
    """Issue 25: an offset past the high watermark was clamped to the end (every record skipped),
    exit 0. Every target naming offsets is refused there, in the plan and with --execute (exit 2),
    and nothing is committed; below the log start it is still clamped up (nothing is skipped)."""
    topic, group = unique("clamp"), unique("group")
    make_topic(broker, topic, 2, 5)
    assert kctl(broker, "rewind", group, "--to-offset", "2", "--topic", topic, "--execute").returncode == 0
    plan = kctl(broker, "rewind", group, "--to-offset", "1000", "--topic", topic, "-f", "json")
    assert plan.returncode == 2, plan.stderr
    assert [(r["new_offset"], r["status"]) for r in json.loads(plan.stdout)] == [(None, "error")] * 2
    for p in (0, 1):
        assert f"partition {topic}-{p}: offset 1000 is past the end of {topic}-{p} (high watermark 5)" in (
            plan.stderr
        )
    (tmp_path / "far.csv").write_text(f"{topic},0,3\n{topic},1,6\n")
    for target in (
        ["--to-offset", "1000"],
        ["--to", "6"],
        ["--to", "+6"],
        ["--shift-by", "4"],  # 2 + 4 = 6
        ["--from-file", str(tmp_path / "far.csv")],  # partition 1 only: nothing is committed anywhere
    ):
        refused = kctl(broker, "rewind", group, *target, "--topic", topic, "--execute", "-f", "json")
        assert refused.returncode == 2, (target, refused.stdout, refused.stderr)
        assert "(high watermark 5)" in refused.stderr and "nothing was committed" in refused.stderr
        assert committed(broker, group) == {(topic, 0): 2, (topic, 1): 2}, target
    # the end itself, and offsets inside the log, are fine; below the log start is clamped up
    end = kctl(broker, "rewind", group, "--to-offset", "5", "--topic", f"{topic}:0", "--execute")
    assert end.returncode == 0, end.stderr
    with AdminClient(broker.bootstrap) as admin:
        assert admin.delete_records({TopicPartition(topic, 1): 3})[TopicPartition(topic, 1)].ok
    low = kctl(broker, "rewind", group, "--to-offset", "1", "--topic", f"{topic}:1", "-f", "json")
    assert low.returncode == 0, low.stderr
    [row] = json.loads(low.stdout)
    assert (row["new_offset"], row["note"]) == (3, "1 clamped to the log start")


def test_rewind_reports_partition_errors(broker: BrokerProcess) -> None:
    topic, group = unique("errors"), unique("group")
    make_topic(broker, topic, 2, 5)
    bad = kctl(broker, "rewind", group, "--to-earliest", "--topic", f"{topic}:0,7", "--execute", "-f", "json")
    assert bad.returncode == 1
    assert [r["status"] for r in json.loads(bad.stdout)] == ["planned", "error"]
    assert "no partition 7" in bad.stderr and "nothing was committed" in bad.stderr
    assert kctl(broker, "describe", group).returncode == 3, "the group was not created"
    missing = kctl(broker, "rewind", group, "--to-latest", "--topic", "no-such-topic")
    assert missing.returncode == 3 and "does not exist" in missing.stderr
    shift = kctl(broker, "rewind", group, "--shift-by", "1", "--topic", topic)
    assert shift.returncode == 1 and "no committed offset to shift" in shift.stderr


def test_rewind_by_time(broker: BrokerProcess) -> None:
    topic, group = unique("time"), unique("group")
    now = int(time.time() * 1000)
    # partition 0: ten records a minute apart, the last one now
    make_topic(broker, topic, 1, 10, timestamps=lambda p, i: now - (9 - i) * 60_000)
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now - 3 * 60_000) / 1000))
    result = kctl(broker, "rewind", group, "--to-datetime", at, "--topic", topic, "-f", "json")
    assert result.returncode == 0, result.stderr
    # records at now-3min (offset 6) or later; the second boundary may round to offset 6 or 7
    assert json.loads(result.stdout)[0]["new_offset"] in (6, 7)
    ago = kctl(broker, "rewind", group, "--by-duration", "PT4M30S", "--topic", topic, "-f", "json")
    assert json.loads(ago.stdout)[0]["new_offset"] == 5
    ago = kctl(broker, "rewind", group, "--by-duration", "150s", "--topic", topic, "-f", "json")
    assert json.loads(ago.stdout)[0]["new_offset"] == 7
    later = kctl(broker, "rewind", group, "--to-datetime", "2999-01-01", "--topic", topic, "-f", "json")
    row = json.loads(later.stdout)[0]
    assert (row["new_offset"], row["note"]) == (10, "no record at or after that time: the log end")
    spec = kctl(broker, "rewind", group, "--to", "-3", "--topic", topic, "-f", "json")
    assert json.loads(spec.stdout)[0]["new_offset"] == 7


def test_rewind_from_file_export_and_to_group(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, source, copy, third = unique("file"), unique("group"), unique("group"), unique("group")
    make_topic(broker, topic, 2, 6)
    plan_file = tmp_path / "plan.csv"
    exported = kctl(broker, "rewind", source, "--to", "-2", "--topic", topic, "--export", str(plan_file))
    assert exported.returncode == 0, exported.stderr
    assert plan_file.read_text() == f"{topic},0,4\n{topic},1,4\n"
    # kafka-consumer-groups.sh's multi-group format works too
    (tmp_path / "groups.csv").write_text(f"{source},{topic},0,1\n{source},{topic},1,2\nother,{topic},0,5\n")
    done = kctl(broker, "rewind", source, "--from-file", str(tmp_path / "groups.csv"), "--execute")
    assert done.returncode == 0, done.stderr
    assert committed(broker, source) == {(topic, 0): 1, (topic, 1): 2}
    done = kctl(broker, "rewind", copy, "--to-group", source, "--execute")
    assert done.returncode == 0, done.stderr
    assert committed(broker, copy) == {(topic, 0): 1, (topic, 1): 2}
    done = kctl(broker, "rewind", third, "--from-file", str(plan_file), "--execute")
    assert committed(broker, third) == {(topic, 0): 4, (topic, 1): 4}
    seen = consume_from(broker, third, topic, 4)
    assert seen == {0: [4, 5], 1: [4, 5]}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["g"], "give exactly one of"),
        (["g", "--to-earliest", "--to-latest"], "give exactly one of"),
        (["g", "--to-earliest", "--topic", "t:x"], "invalid --topic"),
        (["g", "--to-earliest", "--topic", "t", "--all-topics"], "not both"),
        (["g", "--by-duration", "soon", "--topic", "t"], "invalid --by-duration"),
        (["g", "--to-datetime", "yesterday", "--topic", "t"], "invalid --to-datetime"),
        (["g", "--to", "sideways", "--topic", "t"], "invalid --to"),
    ],
)
def test_rewind_usage_errors(broker: BrokerProcess, args: list[str], message: str) -> None:
    result = kctl(broker, "rewind", *args)
    assert result.returncode == 2
    assert message in result.stderr


# -- delete ----------------------------------------------------------------------------------------
def test_delete_offsets_then_groups(broker: BrokerProcess) -> None:
    topic, other, group = unique("del"), unique("del"), unique("group")
    make_topic(broker, topic, 2, 3)
    make_topic(broker, other, 1, 3)
    for args in (["--topic", topic], ["--topic", other]):
        assert kctl(broker, "rewind", group, "--to-latest", *args, "--execute").returncode == 0
    result = kctl(broker, "delete", group, "--offsets", "--topic", f"{topic}:1", "-f", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        {"group": group, "topic": topic, "partition": 1, "status": "deleted"}
    ]
    assert committed(broker, group) == {(topic, 0): 3, (other, 0): 3}
    assert kctl(broker, "delete", group, "--offsets", "--topic", other).returncode == 0
    assert committed(broker, group) == {(topic, 0): 3}

    gone = kctl(broker, "delete", group, "no-such-group", "-f", "json")
    assert gone.returncode == 1
    assert [(r["group"], r["status"]) for r in json.loads(gone.stdout)] == [
        (group, "deleted"),
        ("no-such-group", "GROUP_ID_NOT_FOUND"),
    ]
    assert kctl(broker, "describe", group).returncode == 3
    assert kctl(broker, "delete", group).returncode == 3
    for scope in (topic, f"{topic}:0"):  # the group is gone: not found (3), however it is asked
        missing = kctl(broker, "delete", group, "--offsets", "--topic", scope)
        assert missing.returncode == 3, missing.stderr
        assert missing.stdout == ""


def test_describe_decodes_a_librdkafka_member(broker: BrokerProcess) -> None:
    """kcat -G (librdkafka) joins; describe shows its subscription and assignment."""
    topic, group = unique("kcat"), unique("group")
    make_topic(broker, topic, 3, 2)
    kcat = subprocess.Popen(
        [
            "kcat",
            "-b",
            broker.bootstrap,
            "-G",
            group,
            topic,
            "-X",
            "session.timeout.ms=6000",
            "-o",
            "beginning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            result = kctl(broker, "describe", group, "-f", "json")
            documents = json.loads(result.stdout) if result.returncode == 0 else []
            if documents and documents[0]["state"] == "Stable" and documents[0]["members"]:
                break
            assert time.monotonic() < deadline, result.stderr
            time.sleep(0.1)  # polling interval, bounded by the deadline
        [m] = documents[0]["members"]
        assert m["client_id"] == "rdkafka" and m["topics"] == [topic]
        assert m["assignment"] == [{"topic": topic, "partitions": [0, 1, 2]}]
        assert documents[0]["assignor"] == "range"
    finally:
        kcat.terminate()
        kcat.wait(timeout=TIMEOUT)

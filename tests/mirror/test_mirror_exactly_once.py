"""`kctl mirror --exactly-once` as a real process between two real brokers (issue 27 §3): records and
source positions written in the same target transactions; the source's aborted transactions are not
copied; a mirror SIGKILLed again and again at random moments while the source keeps growing, then
run to the end with --once, leaves the target (read with `kctl consume --isolation read_committed`)
with every source record exactly once, in order, per partition."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from mirror_support import create, kctl, produce, start_mirror
from raw_kafka import running_broker, unique

from kctl.client.producer import Producer
from kctl.testing import BrokerProcess, wait_for

KILLS = 8


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    with (
        running_broker(tmp_path_factory, {"num.partitions": "1"}, "eos-a") as a,
        running_broker(tmp_path_factory, {"num.partitions": "1"}, "eos-b") as b,
    ):
        yield a, b


def committed_records(cluster: BrokerProcess, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    """Per partition, in order: (key, value, headers, timestamp), read_committed."""
    result = kctl(
        "consume", topic, "-b", cluster.bootstrap, "-o", "beginning", "--until", "end", "-f", "jsonl",
        "--isolation", "read_committed",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out: dict[int, list[tuple[Any, ...]]] = {}
    for line in result.stdout.splitlines():
        r = json.loads(line)
        out.setdefault(r["partition"], []).append(
            (r["key"], r["value"], tuple(map(tuple, r["headers"])), r["timestamp"])
        )
    return out


def mirror_args(a: BrokerProcess, b: BrokerProcess, topic: str, group: str) -> list[str]:
    return [
        "--from",
        f"src={a.bootstrap}",
        "--to",
        f"dst={b.bootstrap}",
        "--include",
        topic,
        "--group",
        group,
    ]


def test_once_copies_committed_records_exactly(clusters: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, b = clusters
    topic = unique("eos-once")
    create(a, topic, 2)
    produce(a, topic, 300, 2)
    produce(a, topic, 100, 2, tag="after-")
    with Producer(a.bootstrap, {"transactional.id": unique("src-tid")}) as source:
        source.init_transactions(30)
        source.begin_transaction()
        for i in range(50):
            source.send(topic, b"aborted-%d" % i, partition=i % 2)
        source.abort_transaction(30)  # the source ends with aborted records and markers: --once still ends
    result = kctl("mirror", *mirror_args(a, b, topic, unique("g")), "--once", "--exactly-once")
    assert result.returncode == 0, result.stderr
    source_records, target = committed_records(a, topic), committed_records(b, topic)
    assert sum(map(len, source_records.values())) == 400
    assert target == source_records
    assert not any(value.startswith("aborted") for rows in target.values() for _, value, *_ in rows)


def test_kill_9_in_a_loop_leaves_every_record_exactly_once(
    clusters: tuple[BrokerProcess, BrokerProcess],
) -> None:
    a, b = clusters
    topic, group = unique("eos-kill"), unique("eos-group")
    create(a, topic, 2)
    args = mirror_args(a, b, topic, group)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"\nseed {seed}")
    producing = threading.Event()
    produced = [0]

    def keep_producing() -> None:  # the source keeps growing: every kill lands mid-copy
        producer = ck.Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
        while producing.is_set():
            for _ in range(200):
                producer.produce(
                    topic,
                    value=b"%d" % produced[0],
                    key=b"k%d" % (produced[0] % 5),
                    partition=produced[0] % 2,
                )
                produced[0] += 1
            producer.flush(30)
            producer.poll(0.05)  # the source's pace
        assert producer.flush(30) == 0

    producing.set()
    writer = threading.Thread(target=keep_producing)
    writer.start()
    kills = []
    try:
        for _ in range(KILLS):
            mirror = start_mirror(*args, "--exactly-once")
            try:
                started = time.monotonic()
                # the random moment: once the target grew by a random number of offsets (records
                # and markers) since this mirror started
                goal = _target_end(b, topic) + rng.randint(1, 3000)
                wait_for(
                    lambda mirror=mirror, goal=goal: (
                        mirror.poll() is not None or _target_end(b, topic) >= goal
                    ),
                    "the mirror to copy",
                    60,
                )
                assert mirror.poll() is None, mirror.communicate()[1]
                mirror.kill()
                kills.append(round(time.monotonic() - started, 2))
            finally:
                if mirror.poll() is None:
                    mirror.kill()
                mirror.communicate(timeout=30)
    finally:
        producing.clear()
        writer.join(60)
    print(f"killed after {kills} s; {produced[0]} records produced")
    resumed = kctl("mirror", *args, "--exactly-once", "--once")
    assert resumed.returncode == 0, resumed.stderr
    source, target = committed_records(a, topic), committed_records(b, topic)
    assert sum(map(len, source.values())) == produced[0]
    for partition, rows in source.items():
        got = target.get(partition, [])
        assert len(got) == len(rows), (
            f"partition {partition}: {len(got)} records in the target, {len(rows)} in the source"
        )
        assert got == rows, f"partition {partition}: not the source exactly once, in order"


def _target_end(cluster: BrokerProcess, topic: str) -> int:
    """The sum of the target topic's high watermarks (0 while it does not exist)."""
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("probe")})
    try:
        known = consumer.list_topics(topic, timeout=5).topics.get(topic)
        if known is None or known.error is not None:
            return 0
        return sum(
            consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=5)[1]
            for p in known.partitions
        )
    except ck.KafkaException:
        return 0
    finally:
        consumer.close()

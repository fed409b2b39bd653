"""`kctl mirror` as a real process between real brokers (three single-broker clusters shared by the
module): records identical on both sides (key, value, headers, timestamp, partition, order, compared
with `kctl consume -f jsonl`), include/exclude, configs of created topics, --dry-run, --once,
renaming, new topics and partitions picked up while running, a clean SIGTERM, a source broker
restarted under a running mirror, `kill -9` in the middle
of a copy (nothing lost, duplicates only from the in-flight window: counted and printed), offset
translation for a confluent-kafka group (--sync-group-offsets and --translate-group), two sources
into one aggregate, active-active without loops, an unreachable source, and named clusters whose
SASL settings (clusters file) reach the mirror's clients."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from mirror_support import create, end_offsets, kctl, produce, records, start_mirror, topics
from raw_kafka import running_broker, unique

from kctl.client import AdminClient, GroupAdmin, TopicPartition
from kctl.testing import BrokerProcess, wait_for

MIRROR_PASSWORD = "mirror-secret"
SASL = {  # a and b also listen with SASL_PLAINTEXT (PLAIN, user "mirror"); their bootstrap is PLAINTEXT
    "num.partitions": "1",
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="mirror" password="{MIRROR_PASSWORD}" user_mirror="{MIRROR_PASSWORD}";',
}


@pytest.fixture(scope="module")
def clusters(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[BrokerProcess, BrokerProcess, BrokerProcess]]:
    with (
        running_broker(tmp_path_factory, SASL, "mirror-a") as a,
        running_broker(tmp_path_factory, SASL, "mirror-b") as b,
        running_broker(tmp_path_factory, {"num.partitions": "1"}, "mirror-c") as c,
    ):
        yield a, b, c


def test_once_copies_records_identically_with_include_exclude_and_configs(
    clusters: tuple[BrokerProcess, ...],
) -> None:
    a, b, _ = clusters
    keep, skip = unique("keep"), unique("keep-skip")
    create(a, keep, 3, {"retention.ms": "86400000", "max.message.bytes": "500000"})
    create(a, skip, 1)
    produce(a, keep, 3000, 3)
    produce(a, keep, 500, 3, tag="gzip-", compression="gzip")
    produce(a, skip, 10, 1)
    selection = ["--include", f"{keep}|{skip}", "--exclude", ".*-skip-.*", "--group", f"g-{keep}"]
    plan = kctl(
        "mirror",
        "--from",
        f"dc1={a.bootstrap}",
        "--to",
        f"agg={b.bootstrap}",
        *selection,
        "--dry-run",
        "-f",
        "json",
    )
    assert plan.returncode == 0, plan.stderr
    assert [(r["topic"], r["action"], r["partitions"]) for r in json.loads(plan.stdout)] == [
        (keep, "create", 3)
    ]
    assert keep not in topics(b)  # a dry run changes nothing

    copied = kctl(
        "mirror",
        "--from",
        f"dc1={a.bootstrap}",
        "--to",
        f"agg={b.bootstrap}",
        *selection,
        "--once",
        "-f",
        "json",
    )
    assert copied.returncode == 0, copied.stderr
    assert "renewing the producer id" not in copied.stderr  # every Produce is one the broker takes
    assert sum(r["records"] for r in json.loads(copied.stdout)) == 3500
    source, target = records(a, keep), records(b, keep)
    assert target == source and sum(map(len, target.values())) == 3500
    assert end_offsets(b, keep, 3) == end_offsets(a, keep, 3)  # partitions and offsets as in the source
    assert skip not in topics(b)
    described = kctl("topic", "describe", keep, "-b", b.bootstrap, "-f", "json")
    assert (
        '"retention.ms": "86400000"' in described.stdout
        and '"max.message.bytes": "500000"' in described.stdout
    )

    again = kctl("mirror", "--from", f"dc1={a.bootstrap}", "--to", f"agg={b.bootstrap}", *selection, "--once")
    assert again.returncode == 0, again.stderr
    assert "mirrored 0 records" in again.stderr
    assert records(b, keep) == source


def test_running_mirror_picks_up_new_topics_and_partitions_and_stops_on_sigterm(
    clusters: tuple[BrokerProcess, ...],
) -> None:
    a, b, _ = clusters
    prefix = unique("live")
    first, later = f"{prefix}-one", f"{prefix}-two"
    create(a, first, 2)
    produce(a, first, 100, 2)
    mirror = start_mirror(
        "--from",
        f"dc1={a.bootstrap}",
        "--to",
        f"agg={b.bootstrap}",
        "--include",
        f"{prefix}-.*",
        "--rename",
        "{cluster}.{topic}",
        "--refresh-interval",
        "0.3",
        "--status-interval",
        "0.5",
        "-f",
        "jsonl",
        "--group",
        f"g-{prefix}",
    )
    try:
        wait_for(
            lambda: (
                sum(end_offsets(b, f"dc1.{first}", 2).values()) == 100
                if f"dc1.{first}" in topics(b)
                else False
            ),
            "the first copy",
            60,
        )
        create(a, later, 1)
        produce(a, later, 50, 1)
        assert kctl("topic", "alter", first, "--partitions", "4", "-b", a.bootstrap).returncode == 0
        produce(a, first, 400, 4, tag="more-")
        wait_for(
            lambda: f"dc1.{later}" in topics(b) and sum(end_offsets(b, f"dc1.{later}", 1).values()) == 50,
            "the new topic",
            60,
        )
        wait_for(lambda: sum(end_offsets(b, f"dc1.{first}", 4).values()) == 500, "the new partitions", 60)
    finally:
        mirror.send_signal(signal.SIGTERM)
        out, err = mirror.communicate(timeout=60)
    assert mirror.returncode == 0, err
    status = [json.loads(line) for line in out.splitlines()]
    assert any("records_per_sec" in line and "partitions" in line for line in status)  # periodic status lines
    assert records(b, f"dc1.{first}") == records(a, first)
    assert records(b, f"dc1.{later}") == records(a, later)


def test_a_running_mirror_rides_out_a_source_broker_restart(clusters: tuple[BrokerProcess, ...]) -> None:
    _, b, c = clusters
    topic = unique("restart")
    create(c, topic, 2)
    produce(c, topic, 200, 2)
    mirror = start_mirror(
        "--from",
        f"dc3={c.bootstrap}",
        "--to",
        f"agg={b.bootstrap}",
        "--include",
        topic,
        "--group",
        f"g-{topic}",
        "--refresh-interval",
        "0.3",
        "--commit-interval",
        "0.2",
    )
    try:
        wait_for(
            lambda: topic in topics(b) and sum(end_offsets(b, topic, 2).values()) == 200,
            "the first copy",
            60,
        )
        port = c.port
        c.restart()  # the mirror's connections to its source break; the broker comes back on its port
        assert c.port == port
        assert mirror.poll() is None, "the mirror stopped when its source went away"
        produce(c, topic, 300, 2, tag="after-")
        wait_for(lambda: sum(end_offsets(b, topic, 2).values()) == 500, "the records written after it", 60)
    finally:
        mirror.send_signal(signal.SIGTERM)
        _, err = mirror.communicate(timeout=60)
    assert mirror.returncode == 0, err
    assert records(b, topic) == records(c, topic)


def test_kill_9_mid_copy_loses_nothing_and_duplicates_only_the_in_flight_window(
    clusters: tuple[BrokerProcess, ...],
) -> None:
    a, b, _ = clusters
    topic, group = unique("crash"), unique("crash-group")
    create(a, topic, 2)
    create(b, topic, 2)
    args = [
        "--from",
        f"dc1={a.bootstrap}",
        "--to",
        f"agg={b.bootstrap}",
        "--include",
        topic,
        "--group",
        group,
    ]
    producing = threading.Event()
    produced = [0]

    def keep_producing() -> None:  # the source keeps growing: the mirror is always mid-copy
        # Small batches (librdkafka's default is up to 1 MB, about 70,000 of these records): the
        # mirror forwards them as they are, so they size the in-flight window this test bounds.
        producer = ck.Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 2, "batch.size": 16384})
        while producing.is_set() or produced[0] < 20_000:
            for _ in range(500):
                try:
                    producer.produce(topic, value=b"%d" % produced[0], partition=produced[0] % 2)
                except BufferError:  # librdkafka's queue is full: let it deliver first
                    producer.poll(0.1)
                    continue
                produced[0] += 1
            producer.poll(0.01)
        assert producer.flush(30) == 0

    producing.set()
    writer = threading.Thread(target=keep_producing)
    writer.start()
    mirror = start_mirror(*args, "--commit-interval", "0.1")
    try:

        def committed_some() -> bool:
            with AdminClient(a.bootstrap) as admin:
                values = GroupAdmin(admin).committed_offsets(group)
            return sum(v.offset for v in values.values() if v is not None) > 2000

        wait_for(committed_some, "the mirror to commit positions", 60)
        b.pause()  # the mirror's Produce in flight stays unanswered (the broker reads it on resume)
        try:
            mirror.kill()  # kill -9 in the middle of the copy
            mirror.wait(30)
        finally:
            b.resume()
    finally:
        producing.clear()
        writer.join(60)
        if mirror.poll() is None:
            mirror.kill()
        mirror.communicate(timeout=30)
    with AdminClient(a.bootstrap) as admin:
        committed = GroupAdmin(admin).committed_offsets(group)
    resumed = kctl("mirror", *args, "--once")
    assert resumed.returncode == 0, resumed.stderr
    source, target = records(a, topic), records(b, topic)
    total = sum(map(len, source.values()))
    assert total == produced[0]
    duplicates = 0
    for partition, src in source.items():
        got = target[partition]
        value = committed.get(TopicPartition(topic, partition))
        c = value.offset if value is not None else 0
        m = len(got) - (len(src) - c)  # what the target had when the copy resumed from c
        assert c <= m <= len(src), (partition, c, m, len(src))
        assert got == src[:m] + src[c:], f"partition {partition}: not the source with one repeated window"
        duplicates += m - c
    print(f"\nkill -9 mid-copy: {duplicates} duplicate records of {total} (all {total} on the target)")
    assert duplicates <= total // 2


def test_offset_translation_for_a_confluent_kafka_group(clusters: tuple[BrokerProcess, ...]) -> None:
    a, b, _ = clusters
    topic, group, other = unique("xlate"), unique("billing"), unique("audit")
    create(a, topic, 2)
    create(b, topic, 2)
    produce(b, topic, 100, 2, tag="already-there-")  # target offsets differ from the source's by 50
    produce(a, topic, 400, 2)
    commits = {group: {0: 70, 1: 130}, other: {0: 10, 1: 200}}
    for name, offsets in commits.items():
        consumer = ck.Consumer(
            {"bootstrap.servers": a.bootstrap, "group.id": name, "enable.auto.commit": False}
        )
        consumer.commit(
            offsets=[ck.TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
        consumer.close()
    mirror = start_mirror(
        "--from",
        f"dc1={a.bootstrap}",
        "--to",
        f"agg={b.bootstrap}",
        "--include",
        topic,
        "--group",
        f"m-{topic}",
        "--sync-group-offsets",
        "--groups",
        group,
        "--refresh-interval",
        "0.3",
        "--commit-interval",
        "0.1",
    )
    try:

        def synced() -> bool:
            with AdminClient(b.bootstrap) as admin:
                values = GroupAdmin(admin).committed_offsets(group)
            return {tp.partition: v.offset for tp, v in values.items() if v is not None} == {0: 120, 1: 180}

        wait_for(synced, "the group's offsets translated onto the target", 60)
    finally:
        mirror.send_signal(signal.SIGTERM)
        _, err = mirror.communicate(timeout=60)
    assert mirror.returncode == 0, err

    consumer = ck.Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: dict[int, list[str]] = {0: [], 1: []}
    deadline = time.monotonic() + 60
    while (len(got[0]) < 130 or len(got[1]) < 70) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got[message.partition()].append(message.value().decode())
    consumer.close()
    source = {p: [r[1] for r in rs] for p, rs in records(a, topic).items()}
    assert got[0] == source[0][70:] and got[1] == source[1][130:]  # resumed just after, nothing skipped

    plan = kctl(
        "mirror",
        "--from",
        f"dc1={a.bootstrap}",
        "--to",
        f"agg={b.bootstrap}",
        "--group",
        f"m-{topic}",
        "--translate-group",
        other,
        "-f",
        "json",
    )
    assert plan.returncode == 0, plan.stderr
    rows = {r["partition"]: r for r in json.loads(plan.stdout)}
    assert {p: (r["target_offset"], r["outcome"]) for p, r in rows.items()} == {
        0: (60, "planned"),
        1: (250, "planned"),
    }
    done = kctl(
        "mirror",
        "--from",
        f"dc1={a.bootstrap}",
        "--to",
        f"agg={b.bootstrap}",
        "--group",
        f"m-{topic}",
        "--translate-group",
        other,
        "--execute",
        "-f",
        "json",
    )
    assert done.returncode == 0, done.stderr
    with AdminClient(b.bootstrap) as admin:
        values = GroupAdmin(admin).committed_offsets(other)
    assert {tp.partition: v.offset for tp, v in values.items() if v is not None} == {0: 60, 1: 250}


def test_two_sources_into_one_aggregate_and_active_active_without_loops(
    clusters: tuple[BrokerProcess, ...],
) -> None:
    a, b, c = clusters
    topic = unique("orders")
    for broker, tag in ((a, "dc1-"), (b, "dc2-")):
        create(broker, topic, 2)
        produce(broker, topic, 300, 2, tag=tag)
    selection = ["--include", rf"(?:(?:dc1|dc2)\.)*{topic}", "--rename", "{cluster}.{topic}"]
    aggregate = kctl(
        "mirror",
        "--from",
        f"dc1={a.bootstrap}",
        "--from",
        f"dc2={b.bootstrap}",
        "--to",
        f"agg={c.bootstrap}",
        *selection,
        "--once",
        "--group",
        f"agg-{topic}",
    )
    assert aggregate.returncode == 0, aggregate.stderr
    assert records(c, f"dc1.{topic}") == records(a, topic)
    assert records(c, f"dc2.{topic}") == records(b, topic)

    for _ in range(2):  # both directions, twice: nothing comes back to where it came from
        for source, target, alias, target_alias in ((a, b, "dc1", "dc2"), (b, a, "dc2", "dc1")):
            run = kctl(
                "mirror",
                "--from",
                f"{alias}={source.bootstrap}",
                "--to",
                f"{target_alias}={target.bootstrap}",
                *selection,
                "--once",
                "--group",
                f"aa-{topic}",
            )
            assert run.returncode == 0, run.stderr
    names = {t for t in topics(a) | topics(b) if topic in t}
    assert names == {topic, f"dc1.{topic}", f"dc2.{topic}"}
    assert f"dc2.{topic}" in topics(a) and f"dc1.{topic}" in topics(b)
    assert records(b, f"dc1.{topic}") == records(a, topic)
    assert records(a, f"dc2.{topic}") == records(b, topic)


def test_an_unreachable_source_is_a_clear_error(clusters: tuple[BrokerProcess, ...], tmp_path: Path) -> None:
    _, b, _ = clusters
    result = kctl("mirror", "--from", "dc9=127.0.0.1:1", "--to", f"agg={b.bootstrap}", "--once")
    assert result.returncode == 3
    assert "source dc9" in result.stderr and "127.0.0.1:1" in result.stderr
    named = tmp_path / "clusters.toml"
    named.write_text(
        f"[agg]\nbootstrap.servers = '{b.bootstrap}'\n[gone]\nbootstrap.servers = '127.0.0.1:1'\n"
    )
    by_name = kctl("--clusters", str(named), "mirror", "--from", "gone", "--to", "agg", "--once")
    assert by_name.returncode == 3 and "source gone" in by_name.stderr
    same = kctl("mirror", "--from", f"agg={b.bootstrap}", "--to", f"agg={b.bootstrap}", "--once")
    assert same.returncode == 2


def test_a_target_with_other_partition_counts_gets_records_partitioned_by_key(
    clusters: tuple[BrokerProcess, ...],
) -> None:
    a, b, _ = clusters
    topic = unique("repart")
    create(a, topic, 2)
    create(b, topic, 5)  # exists already, with more partitions: records go by key
    produce(a, topic, 600, 2)
    run = kctl(
        "mirror", "--from", f"dc1={a.bootstrap}", "--to", f"agg={b.bootstrap}", "--include", topic, "--once"
    )
    assert run.returncode == 0, run.stderr
    source, target = records(a, topic), records(b, topic)
    assert sorted(map(repr, (r for rs in target.values() for r in rs))) == sorted(
        map(repr, (r for rs in source.values() for r in rs))
    )
    where: dict[Any, set[int]] = {}
    for partition, rs in target.items():
        for r in rs:
            if r[0] is not None:
                where.setdefault(r[0], set()).add(partition)
    assert all(len(partitions) == 1 for partitions in where.values())  # one key, one partition
    assert len(target) > 2
    for key, (partition,) in where.items():  # per key and source partition, the source's order
        for original in source.values():
            mine = [r for r in original if r[0] == key]
            mirrored = [r for r in target[partition] if r[0] == key and r in mine]
            assert mirrored == mine


def test_named_clusters_with_sasl_settings(clusters: tuple[BrokerProcess, ...], tmp_path: Path) -> None:
    a, b, _ = clusters
    topic = unique("secure")
    create(a, topic, 2)
    produce(a, topic, 400, 2)

    def cluster(name: str, broker: BrokerProcess, password: str) -> str:
        return (
            f"[{name}]\nbootstrap.servers = '{broker.addresses[1]}'\nsecurity.protocol = 'SASL_PLAINTEXT'\n"
            f"sasl.mechanism = 'PLAIN'\nsasl.username = 'mirror'\nsasl.password = '{password}'\n"
        )

    named = tmp_path / "clusters.toml"
    named.write_text(
        cluster("dc1", a, MIRROR_PASSWORD) + cluster("agg", b, MIRROR_PASSWORD) + cluster("bad", a, "wrong")
    )
    mirror = ["--clusters", str(named), "mirror", "--include", topic, "--group", f"g-{topic}"]
    run = kctl(*mirror, "--from", "dc1", "--to", "agg", "--once")
    assert run.returncode == 0, run.stderr
    assert records(b, topic) == records(a, topic)
    translated = kctl(*mirror, "--from", "dc1", "--to", "agg", "--translate-group", "nobody", "-f", "json")
    assert translated.returncode == 0, translated.stderr  # the offset syncs read back over SASL
    assert "no offset syncs" not in translated.stderr
    refused = kctl(*mirror, "--from", "bad", "--to", "agg", "--once")
    assert refused.returncode == 1, refused.stderr  # refused credentials: a failure, not unreachable
    assert "source bad" in refused.stderr and "uthentication" in refused.stderr, refused.stderr

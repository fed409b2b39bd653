"""kcat (librdkafka 2.0.2, Debian) as an independent client of a real `kctl broker start`: metadata,
produce and consume with keys and headers, every compression codec (checked on disk with
`kctl log dump`), partitioned produce, offsets for timestamps, and the protocol features librdkafka
enables from our ApiVersions answer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from raw_kafka import dump_batches, kcat, running_broker, unique

from kctl.testing import BrokerProcess

PARTITIONS = 3  # num.partitions of the module's broker: every auto-created topic has 3 partitions


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": str(PARTITIONS)}, "kcat") as process:
        yield process


def produce(broker: BrokerProcess, topic: str, lines: list[bytes], *args: str) -> None:
    """kcat -P: one message per line; kcat exits once every message is delivered (or fails)."""
    kcat(
        broker.bootstrap,
        "-P",
        "-t",
        topic,
        *args,
        "-X",
        "message.timeout.ms=20000",
        input=b"\n".join(lines) + b"\n",
    )


def consume(broker: BrokerProcess, topic: str, *args: str) -> list[dict[str, Any]]:
    """kcat -C -J from the beginning to the end of every (or the given) partition."""
    result = kcat(broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-J", "-q", *args, timeout=60)
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]


def headers_of(message: dict[str, Any]) -> list[tuple[str, str]]:
    flat = message.get("headers") or []
    return list(zip(flat[0::2], flat[1::2], strict=True))


def test_metadata_lists_the_broker_as_controller_and_topics_with_partitions(broker: BrokerProcess) -> None:
    topic = unique("kcat-meta")
    produce(broker, topic, [b"hello"], "-p", "0")  # auto-creates the topic with num.partitions

    text = kcat(broker.bootstrap, "-L").stdout.decode()
    assert f"broker 0 at {broker.bootstrap} (controller)" in text, text
    assert re.search(rf'topic "{re.escape(topic)}" with {PARTITIONS} partitions:', text), text
    for p in range(PARTITIONS):
        assert re.search(rf"partition {p}, leader 0, replicas: 0, isrs: 0", text), text

    listing = json.loads(kcat(broker.bootstrap, "-L", "-J", "-t", topic).stdout)
    assert listing["controllerid"] == 0
    assert listing["brokers"] == [{"id": 0, "name": broker.bootstrap}]
    [entry] = listing["topics"]
    assert entry["topic"] == topic and "error" not in entry, entry
    assert [p["partition"] for p in entry["partitions"]] == list(range(PARTITIONS))
    for p in entry["partitions"]:
        assert p["leader"] == 0 and p["replicas"] == [{"id": 0}] and p["isrs"] == [{"id": 0}], p


def test_produce_and_consume_keys_values_and_headers(broker: BrokerProcess) -> None:
    topic = unique("kcat-keys")
    lines = [b"key-%d:value %d \xc3\xa9" % (i, i) for i in range(20)]
    produce(
        broker, topic, lines, "-p", "0", "-K", ":", "-H", "trace=abc", "-H", "empty=", "-H", "trace=second"
    )

    messages = consume(broker, topic, "-p", "0")
    assert [m["offset"] for m in messages] == list(range(20))
    assert [(m["key"], m["payload"]) for m in messages] == [(f"key-{i}", f"value {i} é") for i in range(20)]
    for m in messages:
        assert m["partition"] == 0 and m["tstype"] == "create" and m["ts"] > 0, m
        assert headers_of(m) == [("trace", "abc"), ("empty", ""), ("trace", "second")], m
    # nothing went to the other partitions
    assert consume(broker, topic, "-p", "1") == []
    assert consume(broker, topic, "-p", "2") == []


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_produce_is_stored_compressed_and_consumed_intact(
    broker: BrokerProcess, codec: str
) -> None:
    topic = unique(f"kcat-{codec}")
    # repetitive payloads: compression shrinks the batch, so librdkafka really sends it compressed
    lines = [(b"record %05d " % i) + b"the quick brown fox jumps over the lazy dog " * 20 for i in range(500)]
    produce(broker, topic, lines, "-p", "0", "-z", codec, "-k", "fixed-key", "-X", "linger.ms=50")

    messages = consume(broker, topic, "-p", "0")
    assert [m["payload"].encode() for m in messages] == lines
    assert [m["offset"] for m in messages] == list(range(len(lines)))
    assert {m["key"] for m in messages} == {"fixed-key"}

    batches = dump_batches(broker.data_dir / f"{topic}_0")
    assert batches, "no batch on disk"
    assert {b["compression"] for b in batches} == {codec}, batches
    assert all(b["valid"] for b in batches), batches
    assert sum(b["count"] for b in batches) == len(lines)
    raw = sum(len(line) for line in lines)
    assert sum(b["size"] for b in batches) < raw / 4, "the batches are not really compressed"


def test_partitioned_produce_lands_in_the_chosen_partitions(broker: BrokerProcess) -> None:
    topic = unique("kcat-parts")
    for partition, count in ((0, 3), (1, 5), (2, 7)):
        produce(broker, topic, [b"p%d-%d" % (partition, i) for i in range(count)], "-p", str(partition))
    produce(broker, topic, [b"p1-late"], "-p", "1")

    everything = consume(broker, topic)
    by_partition: dict[int, list[tuple[int, str]]] = {}
    for m in everything:
        by_partition.setdefault(m["partition"], []).append((m["offset"], m["payload"]))
    assert by_partition == {
        0: [(i, f"p0-{i}") for i in range(3)],
        1: [(i, f"p1-{i}") for i in range(5)] + [(5, "p1-late")],
        2: [(i, f"p2-{i}") for i in range(7)],
    }
    # consuming one partition from an absolute offset
    tail = consume(broker, topic, "-p", "2", "-o", "4")
    assert [(m["offset"], m["payload"]) for m in tail] == [(i, f"p2-{i}") for i in range(4, 7)]


def query_offset(broker: BrokerProcess, topic: str, partition: int, timestamp: int) -> int:
    out = kcat(broker.bootstrap, "-Q", "-t", f"{topic}:{partition}:{timestamp}").stdout.decode()
    match = re.search(rf"{re.escape(topic)} \[{partition}\] offset (-?\d+)", out)
    assert match, out
    return int(match.group(1))


def test_offsets_for_timestamps(broker: BrokerProcess) -> None:
    topic = unique("kcat-times")
    for round_ in range(3):  # three kcat runs: three groups of increasing timestamps
        produce(broker, topic, [b"r%d-%d" % (round_, i) for i in range(4)], "-p", "1")
    messages = consume(broker, topic, "-p", "1")
    assert len(messages) == 12
    stamps = [(m["offset"], m["ts"]) for m in messages]
    assert [o for o, _ in stamps] == list(range(12))
    assert stamps[4][1] > stamps[3][1] and stamps[8][1] > stamps[7][1], "rounds share a millisecond"

    def expected(ts: int) -> int:
        return next((o for o, t in stamps if t >= ts), -1)

    queries = sorted({t for _, t in stamps} | {stamps[0][1] - 1, stamps[4][1] - 1, stamps[-1][1] + 1, 0})
    for ts in queries:
        assert query_offset(broker, topic, 1, ts) == expected(ts), ts
    assert query_offset(broker, topic, 1, -1) == 12  # latest
    assert query_offset(broker, topic, 1, -2) == 0  # earliest
    assert query_offset(broker, topic, 0, -1) == 0  # an empty partition

    # consuming from a timestamp (librdkafka resolves it with ListOffsets)
    start = stamps[8][1]
    tail = consume(broker, topic, "-p", "1", "-o", f"s@{start}")
    assert [m["offset"] for m in tail] == list(range(expected(start), 12))


def enabled_features(debug_output: str) -> tuple[set[str], set[str]]:
    enabled = set(re.findall(r"Enabling feature (\w+)", debug_output))
    disabled = set(re.findall(r"Disabling feature (\w+)", debug_output))
    return enabled, disabled


def test_librdkafka_enables_the_protocol_features(broker: BrokerProcess) -> None:
    result = kcat(broker.bootstrap, "-L", "-d", "feature")
    enabled, disabled = enabled_features(result.stderr.decode(errors="replace"))
    wanted = {"ApiVersion", "MsgVer2", "LZ4", "ZSTD", "IdempotentProducer", "OffsetTime"}
    assert wanted <= enabled, f"not enabled: {sorted(wanted - enabled)}; disabled: {sorted(disabled)}"
    assert not wanted & disabled, sorted(wanted & disabled)


def test_idempotent_kcat_producer_writes_producer_ids(broker: BrokerProcess) -> None:
    topic = unique("kcat-idem")
    lines = [b"idempotent %d" % i for i in range(50)]
    produce(broker, topic, lines, "-p", "2", "-X", "enable.idempotence=true")
    assert [m["payload"].encode() for m in consume(broker, topic, "-p", "2")] == lines
    batches = dump_batches(broker.data_dir / f"{topic}_2")
    assert batches and all(b["producer_id"] >= 0 and b["base_sequence"] >= 0 for b in batches), batches

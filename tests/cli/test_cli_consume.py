"""`kctl consume` run as a real process against a real broker process: records produced by kcat and
confluent-kafka in every output format, the offset grammar end to end (timestamps, -N, +N, ranges,
--until), termination with concurrent producers, `| head`, Ctrl-C, exit codes, and the exact copy
`kctl consume A ... -f jsonl | kctl produce B -f jsonl --keep-partition --keep-timestamp`."""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import kcat, running_broker, unique

from kctl.client import AdminClient, NewTopic, TopicPartition
from kctl.testing import BrokerProcess

PARTITIONS = 3
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": str(PARTITIONS)}, "consume-cli") as process:
        yield process


def kctl(
    *args: str, input: bytes | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if k != "KCTL_BOOTSTRAP_SERVER"}
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env={**environment, "COLUMNS": "200"},
    )


def consume(
    broker: BrokerProcess, *args: str, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[bytes]:
    return kctl("consume", "-b", broker.bootstrap, *args, timeout=timeout)


def jsonl(result: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]


def create(broker: BrokerProcess, name: str, partitions: int = PARTITIONS) -> str:
    with AdminClient(broker.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, partitions, 1)])
        assert result.ok, result
        admin.cluster.wait_for_topics([name], timeout=TIMEOUT)
    return name


def ck_produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **config: Any) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, **config})
    errors: list[Any] = []
    for record in records:
        producer.produce(topic, on_delivery=lambda e, m: errors.append(e) if e else None, **record)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0 and not errors, errors


def decode(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return value.encode()


def end_offsets(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    with AdminClient(broker.bootstrap) as admin:
        results = admin.list_offsets([TopicPartition(topic, p) for p in range(partitions)], "latest")
    return {tp.partition: r.offset for tp, r in results.items()}


# ----------------------------------------------------------------------------------------- formats


def test_jsonl_envelope_with_binary_keys_values_and_headers(broker: BrokerProcess) -> None:
    topic = create(broker, unique("envelope"))
    sent = [
        {
            "partition": i % PARTITIONS,
            "key": None if i == 0 else (b"\xff\xfe%d" % i if i % 2 else b"key-%d" % i),
            "value": None if i == 1 else (bytes(range(256)) if i % 3 == 0 else f"välue {i}".encode()),
            "headers": [("h", b"\x00\xff"), ("text", "é".encode()), ("h", None)],
            "timestamp": T0 + i,
        }
        for i in range(12)
    ]
    ck_produce(broker.bootstrap, topic, sent, **{"compression.type": "lz4"})
    documents = jsonl(consume(broker, topic, "--offset", "beginning", "--until", "end", "-f", "jsonl"))
    assert len(documents) == len(sent)
    for doc in documents:
        assert list(doc) == [
            "topic",
            "partition",
            "offset",
            "timestamp",
            "timestamp_type",
            "key",
            "value",
            "headers",
        ]
        assert doc["topic"] == topic and doc["timestamp_type"] == "CreateTime"
    got = {(d["partition"], d["offset"]): d for d in documents}
    for p in range(PARTITIONS):
        for offset, want in enumerate(r for r in sent if r["partition"] == p):
            doc = got[(p, offset)]
            assert decode(doc["key"]) == want["key"] and decode(doc["value"]) == want["value"]
            assert doc["timestamp"] == want["timestamp"]
            assert [(k, decode(v)) for k, v in doc["headers"]] == want["headers"]
    first = got[(0, 0)]
    assert first["key"] is None and first["headers"][0] == ["h", {"base64": "AP8="}]
    assert first["headers"][1] == ["text", "é"] and first["headers"][2] == ["h", None]


def test_table_raw_json_and_template_formats(broker: BrokerProcess) -> None:
    topic = create(broker, unique("formats"), 1)
    ck_produce(
        broker.bootstrap,
        topic,
        [
            {
                "partition": 0,
                "key": b"k1",
                "value": b"line one",
                "headers": [("a", b"1"), ("b", b"2")],
                "timestamp": T0,
            },
            {"partition": 0, "key": None, "value": b"tab\there", "timestamp": T0 + 1500},
            {"partition": 0, "key": b"k3", "value": None, "timestamp": T0 + 2000},
        ],
    )
    base = ("--offset", "beginning", "--until", "end", "-q")

    piped = consume(broker, topic, *base)  # no --format and stdout not a terminal: JSON lines
    assert [json.loads(line)["offset"] for line in piped.stdout.decode().splitlines()] == [0, 1, 2]

    table = consume(broker, topic, *base, "-f", "table")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.decode().splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "KEY", "HEADERS", "VALUE"]
    value_column = lines[0].index("VALUE")
    assert [line[value_column:] for line in lines[1:]] == ["line one", "tab\\there", "-"], "VALUE aligned"
    assert lines[1].split() == [topic, "0", "0", "2023-11-14T22:13:20.000Z", "k1", "a=1,b=2", "line", "one"]
    assert lines[2].split() == [topic, "0", "1", "2023-11-14T22:13:21.500Z", "-", "-", "tab\\there"]
    assert lines[3].split() == [topic, "0", "2", "2023-11-14T22:13:22.000Z", "k3", "-", "-"]
    assert table.stderr == b""  # -q

    raw = consume(broker, topic, *base, "-f", "raw")
    assert raw.stdout == b"line one\ntab\there\n\n"

    template = consume(broker, topic, *base, "-f", r"%t|%p|%o|%T|%k|%v|%h|%%\n")
    assert template.stdout.decode().splitlines() == [
        f"{topic}|0|0|{T0}|k1|line one|a=1,b=2|%",
        f"{topic}|0|1|{T0 + 1500}||tab\there||%",
        f"{topic}|0|2|{T0 + 2000}|k3|||%",
    ]
    assert consume(broker, topic, *base, "-f", r"%k\t%v\n").stdout == b"k1\tline one\n\ttab\there\nk3\t\n"

    array = json.loads(consume(broker, topic, *base, "-f", "json").stdout)
    assert [d["offset"] for d in array] == [0, 1, 2] and array[2]["value"] is None
    assert json.loads(consume(broker, topic, "-o", "end", "--until", "end", "-f", "json").stdout) == []

    summary = consume(broker, topic, "--offset", "beginning", "--until", "end", "-f", "raw")
    assert b"consumed 3 records from 1 partition" in summary.stderr


def test_reads_what_kcat_produced_with_every_codec(broker: BrokerProcess) -> None:
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        topic = unique(f"kcat-{codec}")
        lines = [b"k%d:v%d" % (i, i) for i in range(50)]
        kcat(
            broker.bootstrap, "-P", "-t", topic, "-K", ":", "-z", codec, "-H", "src=kcat",
            input=b"\n".join(lines) + b"\n",
        )  # fmt: skip
        documents = jsonl(consume(broker, topic, "-o", "beginning", "-u", "end", "-f", "jsonl"))
        assert sorted((d["key"], d["value"]) for d in documents) == sorted(
            (f"k{i}", f"v{i}") for i in range(50)
        )
        assert all(d["headers"] == [["src", "kcat"]] for d in documents)


# ----------------------------------------------------------------------------------------- offsets


@pytest.fixture(scope="module")
def timed(broker: BrokerProcess) -> str:
    """One partition, records 0..99 with timestamps T0 + i * 60 s (i minutes after T0)."""
    topic = create(broker, unique("timed"), 1)
    ck_produce(
        broker.bootstrap,
        topic,
        [{"partition": 0, "value": b"%d" % i, "timestamp": T0 + i * 60_000} for i in range(100)],
    )
    return topic


@pytest.mark.parametrize(
    ("args", "offsets"),
    [
        (["-o", "beginning", "-u", "end"], range(100)),
        (["-o", "-10", "-u", "end"], range(90, 100)),
        (["-o", "+95", "-u", "end"], range(95, 100)),
        (["-o", "42", "-u", "end"], range(42, 100)),
        (["-o", "10:20"], range(10, 20)),
        (["-o", "beginning:-95"], range(5)),
        (["-o", "-5:end"], range(95, 100)),
        (["-o", "+3:+6"], range(3, 6)),
        (["-o", f"@{T0 + 30 * 60_000}", "-u", "end"], range(30, 100)),
        (["-o", f"@{T0 + 30 * 60_000 + 1}:@{T0 + 40 * 60_000}"], range(31, 40)),
        (["-o", "@2023-11-14T22:43:20Z", "-u", "end"], range(30, 100)),  # T0 + 30 min
        (["-o", "@2023-11-14T23:43:20+01:00", "-u", "end"], range(30, 100)),
        (["-o", "@2023-11-14T22:43:20.001Z:@2023-11-14T22:53:20Z"], range(31, 40)),
        (["-o", "@2023-11-14", "-u", "end"], range(100)),
        (["-o", "@2023-11-15", "-u", "end"], range(0)),  # 2023-11-15T00:00Z is after the last record
        (["-o", "beginning:@2023-11-14T22:18:20Z"], range(5)),
        (["-o", "@2030-01-01", "-u", "end"], range(0)),
        (["-o", "@-1h", "-u", "end"], range(0)),  # every record is years old
        (["-u", "@2023-11-14T22:16:20Z"], range(3)),  # --until alone: from the beginning
        (["-u", "end", "-n", "7"], range(7)),
        (["-o", "5", "-n", "3"], range(5, 8)),
        (["-o", "beginning:end", "-n", "2"], range(2)),
    ],
)
def test_offset_grammar_end_to_end(
    broker: BrokerProcess, timed: str, args: list[str], offsets: range
) -> None:
    documents = jsonl(consume(broker, timed, *args, "-f", "jsonl", timeout=30))
    assert [d["offset"] for d in documents] == list(offsets)
    assert [d["value"] for d in documents] == [str(i) for i in offsets]


def test_durations_relative_to_now(broker: BrokerProcess) -> None:
    topic = create(broker, unique("recent"), 1)
    now = int(time.time() * 1000)
    ages_minutes = [180, 120, 90, 45, 20, 5]
    ck_produce(
        broker.bootstrap,
        topic,
        [{"partition": 0, "value": b"%d" % m, "timestamp": now - m * 60_000} for m in ages_minutes],
    )
    values = [d["value"] for d in jsonl(consume(broker, topic, "-o", "@-1h:end", "-f", "jsonl"))]
    assert values == ["45", "20", "5"]
    values = [d["value"] for d in jsonl(consume(broker, topic, "-o", "@-2h30m:@-30m", "-f", "jsonl"))]
    assert values == ["120", "90", "45"]
    values = [d["value"] for d in jsonl(consume(broker, topic, "-o", "@-1d", "-u", "@-100m", "-f", "jsonl"))]
    assert values == ["180", "120"]


def test_several_partitions_and_patterns(broker: BrokerProcess) -> None:
    prefix = unique("pat")
    a, b = create(broker, f"{prefix}-a"), create(broker, f"{prefix}-b", 2)
    create(broker, f"other-{prefix}", 1)
    ck_produce(broker.bootstrap, a, [{"partition": i % PARTITIONS, "value": b"a%d" % i} for i in range(9)])
    ck_produce(broker.bootstrap, b, [{"partition": i % 2, "value": b"b%d" % i} for i in range(4)])

    documents = jsonl(
        consume(broker, "--pattern", f"{prefix}-.*", "-o", "beginning", "-u", "end", "-f", "jsonl")
    )
    assert sorted(d["value"] for d in documents) == sorted(
        [f"a{i}" for i in range(9)] + [f"b{i}" for i in range(4)]
    )
    per_partition: dict[tuple[str, int], list[int]] = {}
    for d in documents:
        per_partition.setdefault((d["topic"], d["partition"]), []).append(d["offset"])
    assert per_partition == {
        (a, 0): [0, 1, 2],
        (a, 1): [0, 1, 2],
        (a, 2): [0, 1, 2],
        (b, 0): [0, 1],
        (b, 1): [0, 1],
    }

    only = jsonl(consume(broker, a, b, "-p", "1", "-o", "beginning", "-u", "end", "-f", "jsonl"))
    assert sorted((d["topic"], d["value"]) for d in only) == sorted(
        [(a, "a1"), (a, "a4"), (a, "a7"), (b, "b1"), (b, "b3")]
    )
    both = jsonl(consume(broker, a, "-p", "0", "-p", "2", "-o", "-1", "-u", "end", "-f", "jsonl"))
    assert sorted(d["value"] for d in both) == ["a6", "a8"]


def test_until_end_stops_at_the_end_seen_at_start_despite_concurrent_producers(broker: BrokerProcess) -> None:
    topic = create(broker, unique("busy"))
    ck_produce(broker.bootstrap, topic, [{"partition": i % PARTITIONS, "value": b"pre"} for i in range(3000)])
    stop = threading.Event()
    produced = [0]

    def keep_producing() -> None:
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        while not stop.is_set():
            for p in range(PARTITIONS):
                producer.produce(topic, value=b"live", partition=p)
            produced[0] += PARTITIONS
            producer.poll(0.001)
        producer.flush(TIMEOUT)

    thread = threading.Thread(target=keep_producing)
    thread.start()
    try:
        while produced[0] < 300:  # the producer is running while the command starts
            time.sleep(0.01)
        before = end_offsets(broker, topic)
        result = consume(broker, topic, "-o", "beginning", "-u", "end", "-f", "%p %o\n", timeout=60)
        after = end_offsets(broker, topic)
    finally:
        stop.set()
        thread.join()
    assert result.returncode == 0, result.stderr
    offsets: dict[int, list[int]] = {}
    for line in result.stdout.decode().splitlines():
        p, o = line.split()
        offsets.setdefault(int(p), []).append(int(o))
    for p in range(PARTITIONS):
        got = offsets.get(p, [])
        assert got == list(range(len(got))), f"partition {p} has gaps or disorder"
        assert before[p] <= len(got) <= after[p]  # stopped at the end it saw when it started
    assert sum(after.values()) > sum(before.values())  # the producer really ran concurrently


def test_follows_new_records_and_ctrl_c_exits_130(broker: BrokerProcess) -> None:
    topic = create(broker, unique("follow"), 1)
    environment = {k: v for k, v in os.environ.items() if k != "KCTL_BOOTSTRAP_SERVER"}
    process = subprocess.Popen(
        [sys.executable, "-m", "kctl", "consume", topic, "-b", broker.bootstrap, "-f", "jsonl"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + TIMEOUT
        line = b""
        while not line.endswith(b"\n"):  # default --offset end: only records produced from now on
            ck_produce(broker.bootstrap, topic, [{"partition": 0, "value": b"new"}])
            ready, _, _ = select.select([process.stdout], [], [], 1.0)
            if ready:
                line += os.read(process.stdout.fileno(), 65536)
            assert time.monotonic() < deadline, "no record arrived"
        first = json.loads(line.splitlines()[0])
        assert first["value"] == "new"
        process.send_signal(signal.SIGINT)
        assert process.wait(TIMEOUT) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_closed_stdout_ends_quietly(broker: BrokerProcess) -> None:
    topic = create(broker, unique("head"), 1)
    ck_produce(broker.bootstrap, topic, [{"partition": 0, "value": b"%d" % i} for i in range(2000)])
    environment = {k: v for k, v in os.environ.items() if k != "KCTL_BOOTSTRAP_SERVER"}
    for fmt in ("raw", "jsonl", "table", "%v\\n"):
        # follow mode (no --until): only the closed pipe can end it
        script = (
            f'"{sys.executable}" -m kctl consume {topic} -b {broker.bootstrap} -o beginning -f "{fmt}" '
            '| head -n 3; echo "status ${PIPESTATUS[0]}"'
        )
        result = subprocess.run(["bash", "-c", script], capture_output=True, timeout=TIMEOUT, env=environment)
        lines = result.stdout.decode().splitlines()
        assert lines[-1] == "status 0", (fmt, result.stderr)
        assert len(lines) == 4
        assert b"Traceback" not in result.stderr and b"error" not in result.stderr, result.stderr


# ----------------------------------------------------------------------------------------- errors


def test_exit_codes(broker: BrokerProcess, timed: str) -> None:
    cases = [
        (["consume", unique("absent"), "-b", broker.bootstrap], 3, "does not exist"),
        (["consume", "--pattern", "no-such-.*", "-b", broker.bootstrap], 3, "no topic matches"),
        (["consume", timed, "-p", "5", "-b", broker.bootstrap], 3, "has no partition 5"),
        (["consume", timed, "-b", "127.0.0.1:1"], 3, "cannot reach any broker"),
        (["consume", timed, "-o", "yesterday", "-b", broker.bootstrap], 2, "invalid --offset: bad offset"),
        (["consume", timed, "-o", "@-1y", "-b", broker.bootstrap], 2, "bad duration"),
        (["consume", timed, "-o", "5:", "-b", broker.bootstrap], 2, "missing END"),
        (["consume", timed, "-u", "soon", "-b", broker.bootstrap], 2, "invalid --until"),
        (["consume", timed, "-o", "1:2", "-u", "end", "-b", broker.bootstrap], 2, "has an END already"),
        (["consume", timed, "-f", "yaml", "-b", broker.bootstrap], 2, "unknown --format 'yaml'"),
        (["consume", timed, "-f", "%x", "-b", broker.bootstrap], 2, "unknown field %x"),
        (
            ["consume", timed, "-X", "fetch.max.wait=1", "-b", broker.bootstrap],
            2,
            "did you mean 'fetch.max.wait.ms'",
        ),
        (["consume", timed, "-X", "auto.offset.reset=maybe", "-b", broker.bootstrap], 2, "auto.offset.reset"),
        (["consume", "--pattern", "(", "-b", broker.bootstrap], 2, "invalid --pattern"),
        (["consume", "-b", broker.bootstrap, "-o", "end"], 2, "name at least one topic"),
    ]
    for args, code, message in cases:
        result = kctl(*args)
        stderr = result.stderr.decode()
        assert result.returncode == code, (args, result.returncode, stderr)
        assert message in stderr, (args, stderr)
        assert "Traceback" not in stderr
    assert kctl("consume", "--help").returncode == 0


# ----------------------------------------------------------------------------------------- copy


def test_kcats_dash_t_and_dash_e(broker: BrokerProcess) -> None:
    """`kctl consume -t TOPIC -e` as kcat users type it: -t/--topic names a topic, -e is --until end
    (everything written so far, then exit 0)."""
    topic, other = unique("kcat-t"), unique("kcat-t")
    with AdminClient(broker.bootstrap) as admin:
        assert all(r.ok for r in admin.create_topics([NewTopic(topic, 1, 1), NewTopic(other, 1, 1)]))
    produced = kctl("produce", topic, "-b", broker.bootstrap, input=b"one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    read = consume(broker, "-t", topic, "-e", "-o", "beginning", "-f", "raw", timeout=30)
    assert read.returncode == 0, read.stderr
    assert read.stdout.decode().splitlines() == ["one", "two", "three"]
    same = consume(broker, topic, "--topic", topic, "--exit-at-end", "-o", "-1", "-f", "raw", timeout=30)
    assert same.returncode == 0 and same.stdout == b"three\n", same.stderr
    agreeing = consume(broker, "-e", "--until", "end", "-t", topic, "-o", "1", "-f", "raw", timeout=30)
    assert agreeing.returncode == 0 and agreeing.stdout == b"two\nthree\n", agreeing.stderr
    differ = consume(broker, topic, "-t", other, "-e")
    assert differ.returncode == 2 and b"topics named twice, differently" in differ.stderr
    clash = consume(broker, "-t", topic, "-e", "--until", "2")
    assert clash.returncode == 2 and b"-e is --until end" in clash.stderr


def test_consume_jsonl_piped_to_produce_copies_exactly(broker: BrokerProcess) -> None:
    source, target = create(broker, unique("copy-src")), create(broker, unique("copy-dst"))
    sent = []
    for i in range(300):
        sent.append(
            {
                "partition": (i * 7) % PARTITIONS,  # not where murmur2 of the key would put it
                "key": None if i % 11 == 0 else (os.urandom(8) if i % 2 else b"key-%d" % i),
                "value": None if i % 13 == 5 else (os.urandom(i % 300) if i % 3 else f"välue {i}".encode()),
                "headers": [("bin", os.urandom(4)), ("t", b"x"), ("t", None)] if i % 4 else [],
                "timestamp": T0 + i,
            }
        )
    ck_produce(broker.bootstrap, source, sent, **{"compression.type": "zstd"})

    environment = {k: v for k, v in os.environ.items() if k != "KCTL_BOOTSTRAP_SERVER"}
    kctl_cmd = f'"{sys.executable}" -m kctl'
    script = (
        f"set -o pipefail; {kctl_cmd} consume {source} -b {broker.bootstrap} --offset beginning --until end "
        f"--format jsonl -q | {kctl_cmd} produce {target} -b {broker.bootstrap} --format jsonl "
        "--keep-partition --keep-timestamp -q"
    )
    result = subprocess.run(["bash", "-c", script], capture_output=True, timeout=TIMEOUT, env=environment)
    assert result.returncode == 0, result.stderr.decode(errors="replace")

    def read(topic: str) -> list[tuple[Any, ...]]:
        from kctl.client.consumer import Consumer

        with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            records = []
            while len(records) < len(sent):
                batch = consumer.poll(5.0)
                assert batch, f"only {len(records)} records in {topic}"
                records += batch
        return sorted(
            (r.partition, r.offset, r.key, r.value, r.headers, r.timestamp, r.timestamp_type) for r in records
        )

    assert read(target) == read(source)
    assert end_offsets(broker, target) == end_offsets(broker, source)

"""`kctl produce` as a real subprocess against a real broker, with what it wrote read back by kcat and
confluent-kafka: lines with keys and headers, the jsonl envelope with binary keys/values/headers,
partitions and timestamps, --print-offsets in every report format, compression, exit codes."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from raw_kafka import dump_batches, kcat, running_broker, unique

from kctl.client import AdminClient, NewTopic
from kctl.client.partitioner import murmur2_partition
from kctl.testing import BrokerProcess

TIMEOUT = 60.0
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": "1"}, "cli-produce") as process:
        yield process


def kctl_produce(
    broker: BrokerProcess | str, *args: str, input: bytes = b"", timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[bytes]:
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    return subprocess.run(
        [sys.executable, "-m", "kctl", "produce", "-b", bootstrap, *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result


def create_topic(broker: BrokerProcess, partitions: int, prefix: str = "cli") -> str:
    name = unique(prefix)
    with AdminClient(broker.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, partitions, 1)])
        assert result.ok, result
    return name


def read_all(bootstrap: str, topic: str, partitions: int = 1) -> list[Any]:
    """Every message (confluent-kafka, assign from the beginning to EOF), partition by partition."""
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.partition.eof": True}
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        messages: list[Any] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT
        while len(at_end) < partitions:
            assert time.monotonic() < deadline
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            messages.append(message)
        return sorted(messages, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def b64(data: bytes) -> dict[str, str]:
    return {"base64": base64.b64encode(data).decode()}


# ------------------------------------------------------------------------------------------ lines


def test_lines_with_keys_headers_and_offsets_table(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 1)
    data = b"k1:v1\nk2:v:with:colons\nno key here\n:empty key\nk5:\n"
    result = ok(
        kctl_produce(broker, topic, "-K", ":", "-H", "src=cli", "-H", "n=1", "--print-offsets", input=data)
    )
    lines = result.stdout.decode().splitlines()
    assert lines[0].split() == ["LINE", "TOPIC", "PARTITION", "OFFSET", "TIMESTAMP"]
    assert [row.split()[:4] for row in lines[1:]] == [[str(i + 1), topic, "0", str(i)] for i in range(5)]
    assert all(row.split()[4].endswith("Z") and "T" in row.split()[4] for row in lines[1:]), "ISO times"
    assert b"produced 5 records" in result.stderr
    out = kcat(broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k|%s|%h\n").stdout
    assert out.decode().splitlines() == [
        "k1|v1|src=cli,n=1",
        "k2|v:with:colons|src=cli,n=1",
        "|no key here|src=cli,n=1",
        "|empty key|src=cli,n=1",
        "k5||src=cli,n=1",
    ]
    messages = read_all(broker.bootstrap, topic)
    assert [m.key() for m in messages] == [b"k1", b"k2", None, b"", b"k5"]
    assert messages[0].headers() == [("src", b"cli"), ("n", b"1")]


def test_binary_lines_null_marker_partition_and_compression(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 3)
    data = b"\xff\xfe binary \x00\nk\tNULL\n\n"
    result = ok(
        kctl_produce(
            broker, topic, "--partition", "2", "-K", "\t", "--null-marker", "NULL", "-z", "zstd",
            "--print-offsets", "--report-format", "json", input=data,
        )
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert [(r["line"], r["partition"], r["offset"]) for r in report] == [(1, 2, 0), (2, 2, 1), (3, 2, 2)]
    messages = read_all(broker.bootstrap, topic, 3)
    assert [(m.partition(), m.key(), m.value()) for m in messages] == [
        (2, None, b"\xff\xfe binary \x00"),
        (2, b"k", None),  # a tombstone
        (2, None, b""),  # an empty line is an empty value
    ]
    assert {b["compression"] for b in dump_batches(broker.data_dir / f"{topic}_2")} == {"zstd"}


def test_custom_delimiter_splits_records_like_kcat_d(broker: BrokerProcess) -> None:
    """-D/--delimiter (kcat -D): records are the bytes between delimiters; newlines are data."""
    topic = create_topic(broker, 1, "delim")
    data = b"k1:multi\nline;;\xff\x00binary;;k2:NULL;;;;last\n"
    result = ok(
        kctl_produce(
            broker, topic, "-D", ";;", "-K", ":", "--null-marker", "NULL", "--print-offsets",
            "--report-format", "jsonl", input=data,
        )
    )  # fmt: skip
    assert [json.loads(line)["line"] for line in result.stdout.splitlines()] == [1, 2, 3, 4, 5]
    assert [(m.key(), m.value()) for m in read_all(broker.bootstrap, topic)] == [
        (b"k1", b"multi\nline"),
        (None, b"\xff\x00binary"),
        (b"k2", None),
        (None, b""),  # two delimiters in a row: an empty record
        (None, b"last\n"),  # what follows the last delimiter, as it is
    ]
    nul = create_topic(broker, 1, "delim0")
    ok(kctl_produce(broker, nul, "--delimiter", "\\0", input=b"a\x00b\x00"))
    assert [m.value() for m in read_all(broker.bootstrap, nul)] == [b"a", b"b"]
    assert kctl_produce(broker, nul, "-D", "").returncode == 2
    assert kctl_produce(broker, nul, "-D", "\\q").returncode == 2
    assert kctl_produce(broker, nul, "-D", ";", "-f", "jsonl").returncode == 2


def test_keys_spread_over_partitions_like_kafka(broker: BrokerProcess) -> None:
    """murmur2 of the key, as Kafka's clients (test_partitioner checks it against confluent-kafka)."""
    topic = create_topic(broker, 4)
    data = b"".join(b"key-%d=%d\n" % (i, i) for i in range(200))
    ok(kctl_produce(broker, topic, "-K", "=", "-X", "linger.ms=1", "--acks", "1", "-q", input=data))
    messages = read_all(broker.bootstrap, topic, 4)
    assert len(messages) == 200
    assert all(m.partition() == murmur2_partition(m.key(), 4) for m in messages)
    assert len({m.partition() for m in messages}) == 4


def test_a_large_stream(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 2)
    count = 200_000
    data = b"".join(b"%d,%07d\n" % (i % 1000, i) for i in range(count))
    result = ok(kctl_produce(broker, topic, "-K", ",", input=data, timeout=120))
    assert f"produced {count} records".encode() in result.stderr
    out = kcat(broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n").stdout
    assert sorted(out.split()) == [b"%07d" % i for i in range(count)]


# ------------------------------------------------------------------------------------------ jsonl


def test_jsonl_envelope_binary_safe_with_partitions_and_timestamps(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 3)
    records = [
        {"topic": "elsewhere", "partition": 2, "offset": 99, "timestamp": T0, "timestamp_type": "CreateTime",
         "key": "text key", "value": "text ☃",
         "headers": [["a", "1"], ["a", "2"], ["bin", b64(b"\x00\xff")]]},
        {"partition": 1, "timestamp": T0 + 5, "key": b64(b"\xff\x00k"), "value": b64(bytes(range(256))),
         "headers": [["null", None]]},
        {"partition": 1, "timestamp": T0 + 6, "key": None, "value": None},
        {"partition": 0, "timestamp": T0 + 7, "value": ""},
    ]  # fmt: skip
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records) + b"\n"  # a blank line is skipped
    result = ok(
        kctl_produce(
            broker, topic, "-f", "jsonl", "--keep-partition", "--keep-timestamp", "-H", "copied=yes",
            "--print-offsets", "--report-format", "jsonl", input=data,
        )
    )  # fmt: skip
    report = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["line"], r["topic"], r["partition"], r["offset"]) for r in report] == [
        (1, topic, 2, 0),
        (2, topic, 1, 0),
        (3, topic, 1, 1),
        (4, topic, 0, 0),
    ]
    by_partition = {(m.partition(), m.offset()): m for m in read_all(broker.bootstrap, topic, 3)}
    first = by_partition[(2, 0)]
    assert (first.key(), first.value(), first.timestamp()) == (b"text key", "text ☃".encode(), (1, T0))
    assert first.headers() == [("a", b"1"), ("a", b"2"), ("bin", b"\x00\xff"), ("copied", b"yes")]
    second = by_partition[(1, 0)]
    assert (second.key(), second.value(), second.timestamp()[1]) == (b"\xff\x00k", bytes(range(256)), T0 + 5)
    assert second.headers() == [("null", None), ("copied", b"yes")]
    assert (by_partition[(1, 1)].key(), by_partition[(1, 1)].value()) == (None, None)
    assert by_partition[(0, 0)].value() == b""
    # without --keep-*: partition by key and timestamp now
    before = int(time.time() * 1000) - 1000
    ok(kctl_produce(broker, topic, "-f", "jsonl", "-q", input=json.dumps(records[0]).encode()))
    latest = max(read_all(broker.bootstrap, topic, 3), key=lambda m: m.timestamp()[1])
    assert latest.timestamp()[1] >= before and latest.value() == "text ☃".encode()


def test_consume_jsonl_piped_into_produce_copies_a_topic(broker: BrokerProcess) -> None:
    source, target = create_topic(broker, 2, "src"), create_topic(broker, 2, "dst")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        headers = [("i", b"%d" % i), ("bin", bytes([i, 255]))]
        producer.produce(source, bytes([i, 0, 255]) * i, key=b"k%d" % (i % 5), partition=i % 2,
                         timestamp=T0 + i, headers=headers)  # fmt: skip
    assert producer.flush(30) == 0
    consume = subprocess.run(
        [sys.executable, "-m", "kctl", "consume", source, "-b", broker.bootstrap, "--offset", "beginning",
         "--until", "end", "-f", "jsonl", "-q"],
        capture_output=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert consume.returncode == 0, consume.stderr
    ok(
        kctl_produce(
            broker, target, "-f", "jsonl", "--keep-partition", "--keep-timestamp", input=consume.stdout
        )
    )

    def fields(m: Any) -> tuple[Any, ...]:
        return (m.partition(), m.offset(), m.key(), m.value(), m.timestamp(), m.headers())

    assert [fields(m) for m in read_all(broker.bootstrap, target, 2)] == [
        fields(m) for m in read_all(broker.bootstrap, source, 2)
    ]


# ------------------------------------------------------------------------------------------ failures


def test_bad_lines_and_undeliverable_records_exit_1(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 1)
    data = b'{"value": "ok"}\nnot json\n{"value": {"base64": "!!!"}}\n{"value": "x", "headers": 5}\n[1]\n'
    data += b'{"value": "' + b"y" * 3000 + b'"}\n{"value": "last"}\n'
    result = kctl_produce(broker, topic, "-f", "jsonl", "-X", "max.request.size=2000", input=data)
    assert result.returncode == 1
    errors = result.stderr.decode()
    for line in (2, 3, 4, 5, 6):
        assert f"line {line}:" in errors
    assert "MESSAGE_TOO_LARGE" in errors and "produced 2 records" in errors and "5 failed" in errors
    assert [m.value() for m in read_all(broker.bootstrap, topic)] == [b"ok", b"last"]


def test_exit_3_when_the_broker_cannot_be_reached() -> None:
    result = kctl_produce("127.0.0.1:1", "t", input=b"x\n")
    assert result.returncode == 3
    assert b"cannot reach any broker" in result.stderr


def test_exit_3_for_a_missing_topic_or_partition(broker_factory: Any) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    result = kctl_produce(broker, "missing", input=b"x\n")
    assert result.returncode == 3 and b"does not exist" in result.stderr
    topic = create_topic(broker, 2)
    result = kctl_produce(broker, topic, "--partition", "5", input=b"x\n")
    assert result.returncode == 3 and b"no partition 5" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--format", "xml"],
        ["--report-format", "yaml"],
        ["-X", "no.such.property=1"],
        ["-X", "acks=2"],
        ["--compression", "brotli"],
        ["--keep-partition"],
        ["-f", "jsonl", "-K", ":"],
        ["--partition", "1", "-f", "jsonl", "--keep-partition"],
        ["-H", "novalue"],
    ],
)
def test_usage_errors_exit_2(broker: BrokerProcess, args: list[str]) -> None:
    result = kctl_produce(broker, "t", *args, input=b"x\n")
    assert result.returncode == 2, result.stderr
    assert b"kctl: error:" in result.stderr


def test_empty_input_is_fine(broker: BrokerProcess) -> None:
    result = ok(kctl_produce(broker, create_topic(broker, 1), "--print-offsets", "--report-format", "json"))
    assert json.loads(result.stdout) == []
    assert b"produced 0 records" in result.stderr


def test_format_json_reads_the_array_consume_writes(broker: BrokerProcess) -> None:
    """`consume -f json | produce -f json` copies records (not "[" and "]" as values); input that is
    not one JSON array is refused before anything is sent; `-f table` reads lines."""
    source, topic = create_topic(broker, 1, "jsrc"), create_topic(broker, 1)
    ok(kctl_produce(broker, source, "-f", "jsonl", input=b'{"key": "k", "value": "x"}\n{"value": "y"}\n'))
    consume = subprocess.run(
        [sys.executable, "-m", "kctl", "consume", source, "-b", broker.bootstrap, "--offset", "beginning",
         "--until", "end", "-f", "json", "-q"],
        capture_output=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert consume.returncode == 0, consume.stderr
    result = ok(kctl_produce(broker, topic, "-f", "json", "--print-offsets", input=consume.stdout))
    assert [(r["line"], r["offset"]) for r in json.loads(result.stdout)] == [(1, 0), (2, 1)]
    assert [(m.key(), m.value()) for m in read_all(broker.bootstrap, topic)] == [(b"k", b"x"), (None, b"y")]
    refused = kctl_produce(broker, topic, "-f", "json", input=b'{"value": "x"}\nplain\n')
    assert refused.returncode == 2 and b"one JSON array" in refused.stderr
    assert len(read_all(broker.bootstrap, topic)) == 2, "nothing sent"
    lines = ok(kctl_produce(broker, topic, "-f", "table", "--report-format", "json", "--print-offsets",
                            input=b'{"value": "z"}\n'))  # fmt: skip
    assert [r["offset"] for r in json.loads(lines.stdout)] == [2]
    assert read_all(broker.bootstrap, topic)[-1].value() == b'{"value": "z"}'
    result = ok(kctl_produce(broker, topic, "-f", "jsonl", "--print-offsets", input=b'{"value": "y"}\n'))
    assert json.loads(result.stdout) == {
        "line": 1,
        "topic": topic,
        "partition": 0,
        "offset": 3,
        "timestamp": json.loads(result.stdout)["timestamp"],
    }


def test_each_file_argument_is_one_record_like_kcat(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = create_topic(broker, 1)
    first, second = tmp_path / "a.bin", tmp_path / "b.txt"
    first.write_bytes(b"\x00\xffbinary\nwith a newline\n")
    second.write_bytes(b"")
    ok(kctl_produce(broker, topic, str(first), str(second), "-H", "src=file"))
    messages = read_all(broker.bootstrap, topic)
    assert [(m.key(), m.value(), m.headers()) for m in messages] == [
        (None, b"\x00\xffbinary\nwith a newline\n", [("src", b"file")]),
        (None, b"", [("src", b"file")]),
    ]
    missing = kctl_produce(broker, topic, str(first), str(tmp_path / "nope"))
    assert missing.returncode == 3 and b"no such file" in missing.stderr
    assert kctl_produce(broker, topic, str(first), "-f", "jsonl").returncode == 2
    assert len(read_all(broker.bootstrap, topic)) == 2, "nothing sent by the refused runs"


def test_kcats_dash_t_names_the_topic(broker: BrokerProcess, tmp_path: Path) -> None:
    """kcat users type `-P -t TOPIC [FILE...]`: -t/--topic is the topic, every argument then a FILE;
    the topic given both ways must be the same topic."""
    topic = create_topic(broker, 1)
    ok(kctl_produce(broker, "-t", topic, input=b"a\nb\n"))
    ok(kctl_produce(broker, topic, "--topic", topic, input=b"c\n"))  # the same topic twice: fine
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"whole\nfile")
    ok(kctl_produce(broker, "-t", topic, str(blob)))  # kcat -P -t TOPIC FILE
    assert [m.value() for m in read_all(broker.bootstrap, topic)] == [b"a", b"b", b"c", b"whole\nfile"]
    other = create_topic(broker, 1)
    both = kctl_produce(broker, other, "-t", topic, input=b"x\n")
    assert both.returncode == 2, both.stderr
    assert f"two topics given: '{other}' as an argument and '{topic}' with -t".encode() in both.stderr
    neither = kctl_produce(broker, input=b"x\n")
    assert neither.returncode == 2 and b"TOPIC or -t TOPIC" in neither.stderr
    assert read_all(broker.bootstrap, other) == [] and len(read_all(broker.bootstrap, topic)) == 4


def test_an_input_template_like_rpks(broker: BrokerProcess) -> None:
    topic = create_topic(broker, 2)
    data = b"0|k1|a=1|first value\n1|k2||second|value\nno separators here\n"
    result = kctl_produce(
        broker, topic, "-f", r"%p|%k|%h|%v\n", "--print-offsets", "--report-format", "json", input=data
    )
    assert result.returncode == 1, result.stderr  # the third line does not match
    assert b"line 3: does not match the template" in result.stderr
    assert [r["line"] for r in json.loads(result.stdout)] == [1, 2]
    messages = read_all(broker.bootstrap, topic, 2)
    assert [(m.partition(), m.key(), m.value(), m.headers() or []) for m in messages] == [
        (0, b"k1", b"first value", [("a", b"1")]),
        (1, b"k2", b"second|value", []),
    ]
    # consume's template output reads back through the same template
    source = subprocess.run(
        [sys.executable, "-m", "kctl", "consume", topic, "-b", broker.bootstrap, "-o", "beginning",
         "-u", "end", "-q", "-f", r"%k=%v;"],
        capture_output=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert source.returncode == 0, source.stderr
    copy = create_topic(broker, 1)
    ok(kctl_produce(broker, copy, "-f", r"%k=%v;", input=source.stdout))
    assert sorted((m.key(), m.value()) for m in read_all(broker.bootstrap, copy)) == [
        (b"k1", b"first value"),
        (b"k2", b"second|value"),
    ]
    for bad in (r"%k %v", r"%o %v\n", r"%k %k\n", "yaml"):
        refused = kctl_produce(broker, topic, "-f", bad)
        assert refused.returncode == 2, (bad, refused.stderr)

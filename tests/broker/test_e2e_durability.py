"""Durability of a real `kctl broker start` across restarts: a clean stop keeps every record and the
offsets continue; a SIGKILL while an acks=all producer is running loses nothing that was
acknowledged (the acknowledged offsets come from the producer's delivery reports), leaves no gaps,
and the next start recovers the logs (it says so, and `kctl log verify` finds them clean)."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, ResourceType
from raw_kafka import (
    RawConnection,
    create_topic,
    kcat,
    kctl,
    log_since,
    log_size,
    produce,
    unique,
)

import kctl.protocol as kp
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.records.builder import RecordBatchBuilder
from kctl.testing import BrokerProcess, wait_for

T0 = 1_700_000_000_000
SEGMENT_BYTES = 64 * 1024  # small segments: production rolls several, recovery sees more than one


def start_broker(tmp_path: Path, **properties: str) -> BrokerProcess:
    return BrokerProcess(tmp_path / "data", properties).start()


def read_partition(
    broker: BrokerProcess, topic: str, partition: int, *args: str
) -> list[tuple[int, str, str]]:
    """(offset, key, value) of every record, read with kcat to the end of the partition (``args`` may
    add an -o start offset, a -c count or another -f format with three fields)."""
    result = kcat(
        broker.bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-q",
        "-f", "%o %k %s\n", *args,
    )  # fmt: skip
    rows = []
    for line in result.stdout.decode().splitlines():
        offset, key, value = line.split(" ", 2)
        rows.append((int(offset), key, value))
    return rows


def kcat_produce(broker: BrokerProcess, topic: str, partition: int, lines: list[str]) -> None:
    data = "".join(f"{line}\n" for line in lines).encode()
    kcat(
        broker.bootstrap, "-P", "-t", topic, "-p", str(partition), "-K", ":",
        "-X", "acks=all", "-X", "batch.size=16384", input=data,
    )  # fmt: skip


def test_clean_restart_keeps_records_and_offsets_continue(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, **{"log.segment.bytes": str(SEGMENT_BYTES)})
    try:
        topic = unique("restart")
        assert create_topic(broker.bootstrap, topic, partitions=2, configs={"retention.ms": "-1"}) == 0
        first = {p: [f"k{p}-{i}:value-{p}-{i}-" + "x" * 100 for i in range(1500)] for p in (0, 1)}
        for partition, lines in first.items():
            kcat_produce(broker, topic, partition, lines)
        segments_before = sorted(p.name for p in (broker.data_dir / f"{topic}_0").glob("*.log"))
        assert len(segments_before) > 1, "the test wants several segments"

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        [deleted] = admin.delete_records([ck.TopicPartition(topic, 1, 100)], request_timeout=20).values()
        assert deleted.result(20).low_watermark == 100
        [grown] = admin.create_partitions([NewPartitions(topic, 3)], request_timeout=20).values()
        assert grown.result(20) is None

        assert broker.stop() == 0, broker.log_tail()
        assert (broker.data_dir / ".kctl_cleanshutdown").exists()
        position = log_size(broker)
        broker.start()
        startup = log_since(broker, position)
        assert not re.search(r"recover", startup, re.IGNORECASE), f"recovery after a clean stop:\n{startup}"

        listing = kcat(broker.bootstrap, "-L", "-t", topic).stdout.decode()
        assert f'topic "{topic}" with 3 partitions' in listing, listing
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        [configs] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        assert configs.result(20)["retention.ms"].value == "-1"
        rows = read_partition(broker, topic, 0)
        assert [(o, f"{k}:{v}") for o, k, v in rows] == list(enumerate(first[0]))
        rows = read_partition(broker, topic, 1)  # the log start offset set by DeleteRecords holds
        assert [(o, f"{k}:{v}") for o, k, v in rows] == list(enumerate(first[1]))[100:]
        assert read_partition(broker, topic, 2) == []

        more = [f"k-after-{i}:after-{i}" for i in range(10)]
        kcat_produce(broker, topic, 0, more)
        rows = read_partition(broker, topic, 0)
        assert [o for o, _, _ in rows] == list(range(1510))
        assert [f"{k}:{v}" for _, k, v in rows[1500:]] == more
        segments_after = sorted(p.name for p in (broker.data_dir / f"{topic}_0").glob("*.log"))
        assert segments_after[: len(segments_before)] == segments_before
    finally:
        broker.stop()


def assert_verifies_clean(partition_dir: Path) -> None:
    verify = kctl("log", "verify", str(partition_dir))
    assert verify.returncode == 0, (verify.stdout + verify.stderr).decode(errors="replace")


def assert_recovery_logged(startup: str) -> None:
    assert re.search(r"recover", startup, re.IGNORECASE), f"no recovery logged after SIGKILL:\n{startup}"


def test_start_after_sigkill_recovers_a_torn_tail(tmp_path: Path) -> None:
    """A batch half written when the broker died: the next start cuts it, says so, and appends after
    the last whole batch."""
    broker = start_broker(tmp_path)
    try:
        topic = unique("torn")
        lines = [f"k{i}:v{i}" for i in range(100)]
        kcat_produce(broker, topic, 0, lines)
        partition_dir = broker.data_dir / f"{topic}_0"
        [segment] = partition_dir.glob("*.log")
        whole = segment.stat().st_size
        assert broker.kill() == -9
        # the start of a batch (base offset 100, a length of 500 bytes) of which only 40 bytes made it
        with open(segment, "ab") as handle:
            handle.write(struct.pack(">qi", 100, 500) + b"\x00\x00\x00\x00\x02" + b"\xab" * 27)
        assert kctl("log", "verify", str(partition_dir)).returncode == 1  # the damage is visible

        position = log_size(broker)
        broker.start()
        startup = log_since(broker, position)
        assert segment.stat().st_size == whole, "the torn batch was not cut"
        assert_verifies_clean(partition_dir)
        kcat_produce(broker, topic, 0, ["after:restart"])
        rows = read_partition(broker, topic, 0)
        assert [(o, f"{k}:{v}") for o, k, v in rows] == list(enumerate([*lines, "after:restart"]))
        assert_recovery_logged(startup)
    finally:
        broker.stop()


PRODUCER = textwrap.dedent(
    """
    import sys
    import confluent_kafka

    bootstrap, topic = sys.argv[1], sys.argv[2]
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 2,
        "batch.num.messages": 50,
        "message.timeout.ms": 60000,
    })
    out = sys.stdout

    def delivered(error, message):
        if error is None:  # one line per acknowledged record: offset and sequence number
            out.write(f"{message.offset()} {message.value()[:9].decode()}\\n")
            out.flush()

    seq = 0
    while True:
        try:
            producer.produce(topic, value=b"%09d" % seq + b"." * 200, partition=0, on_delivery=delivered)
            seq += 1
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    """
)


class AckCollector:
    """Reads the producer's acknowledgement lines (complete lines only) in a thread."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.acks: list[tuple[int, int]] = []
        self._process = process
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.endswith(b"\n"):
                offset, seq = line.split()
                self.acks.append((int(offset), int(seq)))

    def join(self) -> None:
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()


def test_sigkill_during_production_loses_no_acknowledged_record(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    producer: subprocess.Popen[bytes] | None = None
    try:
        topic = unique("kill9")
        assert create_topic(broker.bootstrap, topic, configs={"segment.bytes": str(SEGMENT_BYTES)}) == 0
        script = tmp_path / "producer.py"
        script.write_text(PRODUCER)
        producer = subprocess.Popen(
            [sys.executable, str(script), broker.bootstrap, topic],
            stdout=subprocess.PIPE,
            stderr=open(tmp_path / "producer.err", "wb"),  # noqa: SIM115 - closed with the process
        )
        collector = AckCollector(producer)
        wait_for(lambda: len(collector.acks) >= 5000 or producer.poll() is not None, "5000 acks", 60)
        assert producer.poll() is None, (tmp_path / "producer.err").read_text()

        assert broker.kill() == -9  # SIGKILL while the producer keeps sending
        acknowledged_at_kill = len(collector.acks)
        producer.kill()
        producer.wait(timeout=30)
        collector.join()
        acks = collector.acks
        assert len(acks) >= acknowledged_at_kill >= 5000
        # the producer's own view: acknowledgements arrive in offset order, one per sequence number
        assert acks == [(i, i) for i in range(len(acks))], "the producer saw gaps or reordering"
        last_acked = acks[-1][0]

        position = log_size(broker)
        broker.start()
        startup = log_since(broker, position)
        assert_verifies_clean(broker.data_dir / f"{topic}_0")

        rows = read_partition(broker, topic, 0)
        assert len(rows) > last_acked, f"{len(rows)} records after recovery, {last_acked + 1} acknowledged"
        # every offset up to the end holds the record sent in that position: nothing acknowledged is
        # lost, nothing is reordered, no gap, no duplicate (the unacknowledged tail may or may not be there)
        assert [(o, int(v[:9])) for o, _, v in rows] == [(i, i) for i in range(len(rows))]

        # the rebuilt indexes: reading from the middle, and looking up a timestamp
        middle = last_acked // 2
        tail = read_partition(broker, topic, 0, "-o", str(middle), "-c", "3")
        assert [(o, int(v[:9])) for o, _, v in tail] == [(middle + i, middle + i) for i in range(3)]
        stamped = read_partition(broker, topic, 0, "-f", "%o %T %s\n")
        stamps = [int(k) for _, k, _ in stamped]
        wanted = stamps[middle]
        first_at = next(o for o, ts in enumerate(stamps) if ts >= wanted)
        query = kcat(broker.bootstrap, "-Q", "-t", f"{topic}:0:{wanted}").stdout.decode()
        assert f"[0] offset {first_at}" in query, query

        # the log goes on from where recovery left it
        end = len(rows)
        kcat_produce(broker, topic, 0, ["after:after-restart"])
        assert read_partition(broker, topic, 0)[end:] == [(end, "after", "after-restart")]
        assert_recovery_logged(startup)
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
            producer.wait(timeout=30)
        broker.stop()


def test_topic_created_just_before_sigkill_survives(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        topic = unique("meta-kill")
        assert create_topic(broker.bootstrap, topic, partitions=4, configs={"cleanup.policy": "compact"}) == 0
        assert broker.kill() == -9
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        cluster = admin.list_topics(topic, timeout=20)
        assert cluster.topics[topic].error is None
        assert sorted(cluster.topics[topic].partitions) == [0, 1, 2, 3]
        [configs] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        assert configs.result(20)["cleanup.policy"].value == "compact"
        kcat_produce(broker, topic, 3, ["k:v"])
        assert read_partition(broker, topic, 3) == [(0, "k", "v")]
    finally:
        broker.stop()


def test_idempotent_producer_runs_through_sigkill_and_restart_exactly_once(tmp_path: Path) -> None:
    """librdkafka's idempotent producer keeps going while the broker is killed and restarted: batches
    appended but not acknowledged are retried, and the restarted broker (its producer state rebuilt from
    the recovered log) must neither duplicate nor drop nor reorder them."""
    broker = start_broker(tmp_path)
    topic = unique("idem-kill")
    assert create_topic(broker.bootstrap, topic, configs={"segment.bytes": str(SEGMENT_BYTES)}) == 0
    total = 20_000
    producer = ck.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 50,
            "message.timeout.ms": 60000,
            "log_level": 2,
        }
    )
    reports: list[tuple[object, int]] = []
    stop = threading.Event()

    def delivered(error: object, message: ck.Message) -> None:
        reports.append((error, message.offset()))

    def produce_all() -> None:
        for seq in range(total):
            while len(producer) >= 2000 and not stop.is_set():  # keep production paced, always in flight
                producer.poll(0.01)
            if stop.is_set():
                return
            producer.produce(topic, value=b"%09d" % seq + b"." * 100, partition=0, on_delivery=delivered)
            producer.poll(0)

    thread = threading.Thread(target=produce_all, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(reports) >= 4000, "4000 acknowledgements", 60)
        assert broker.kill() == -9
        broker.start()
        thread.join(timeout=90)
        assert not thread.is_alive()
        assert producer.flush(60) == 0
        assert [e for e, _ in reports if e is not None] == []
        assert sorted(o for _, o in reports) == list(range(total))
        rows = read_partition(broker, topic, 0)
        assert [(o, int(v[:9])) for o, _, v in rows] == [(i, i) for i in range(total)]
    finally:
        stop.set()
        thread.join(timeout=30)
        broker.stop()


@pytest.mark.parametrize("clean", [True, False], ids=["clean-restart", "kill-9"])
def test_idempotent_retry_across_a_segment_roll_and_a_restart_is_deduplicated(
    tmp_path: Path, clean: bool
) -> None:
    """A producer's batch that sits in an older segment is still known after a restart (producer
    snapshots + header replay): its retry is answered with the original offsets and written nowhere."""
    broker = start_broker(tmp_path, **{"log.segment.bytes": str(SEGMENT_BYTES)})
    try:
        topic = unique("idem-roll")
        assert create_topic(broker.bootstrap, topic) == 0
        with RawConnection(broker.bootstrap) as conn:
            init = conn.request(
                kp.ApiKey.INIT_PRODUCER_ID,
                4,
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
            )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch

        def batch(sequence: int) -> bytes:
            builder = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=sequence)
            for i in range(10):
                builder.append(T0 + sequence + i, b"k%d" % (sequence + i), b"v" * 1000)
            return builder.build()

        batches = [batch(10 * n) for n in range(20)]  # ~10 KB each: about six to a 64 KiB segment
        offsets = []
        for data in batches:
            answer = produce(broker.bootstrap, topic, 0, data, acks=-1)
            assert answer.error_code == 0
            offsets.append(answer.base_offset)
        assert offsets == list(range(0, 200, 10))
        segments = sorted(int(p.stem) for p in (broker.data_dir / f"{topic}_0").glob("*.log"))
        older = [n for n in range(15, 20) if offsets[n] < segments[-1]]  # recent batches in older segments
        assert older, f"the test wants one of the last five batches before the active segment {segments}"

        broker.restart(clean=clean)
        for n in (older[0], 19):
            retry = produce(broker.bootstrap, topic, 0, batches[n], acks=-1)
            assert (retry.error_code, retry.base_offset) == (0, offsets[n])
        gap = produce(broker.bootstrap, topic, 0, batch(10 * 21), acks=-1)
        assert gap.error_code == kp.ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        follow_on = produce(broker.bootstrap, topic, 0, batch(10 * 20), acks=-1)
        assert (follow_on.error_code, follow_on.base_offset) == (0, 200)
        assert [offset for offset, _, _ in read_partition(broker, topic, 0)] == list(range(210))
    finally:
        broker.stop()


def test_the_broker_forgets_producers_silent_past_producer_id_expiration(tmp_path: Path) -> None:
    """producer.id.expiration.ms on the broker's schedule: while a producer is remembered, a gap in
    its sequence is refused; once it has expired, the same batch is accepted as from a new producer.
    Before any producer was forgotten, a producer new to the partition must start at sequence 0."""
    broker = start_broker(
        tmp_path, **{"producer.id.expiration.ms": "3000", "producer.id.expiration.check.interval.ms": "100"}
    )
    try:
        topic = unique("idem-expiry")
        assert create_topic(broker.bootstrap, topic) == 0
        pid, epoch = 9_000, 0

        def batch(sequence: int, producer_id: int = pid) -> bytes:
            builder = RecordBatchBuilder(
                producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
            )
            builder.append(int(time.time() * 1000), None, b"seq-%d" % sequence)
            return builder.build()

        late_start = produce(broker.bootstrap, topic, 0, batch(7, producer_id=9_001), acks=-1)
        assert late_start.error_code == kp.ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(broker.bootstrap, topic, 0, batch(0), acks=-1).error_code == 0
        refused = produce(broker.bootstrap, topic, 0, batch(50), acks=-1)
        assert refused.error_code == kp.ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        gap = batch(50)  # its timestamp is now: it will not itself count as expired
        accepted = wait_for(
            lambda: produce(broker.bootstrap, topic, 0, gap, acks=-1).error_code == 0,
            "the producer to expire",
            timeout=30,
        )
        assert accepted
        assert [value for _, _, value in read_partition(broker, topic, 0)] == ["seq-0", "seq-50"]
        assert "forgot 1 idempotent producer" in broker.log_tail()
    finally:
        broker.stop()

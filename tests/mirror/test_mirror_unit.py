"""The mirror's pure parts, without a broker: restamping batches (header fields and CRC only, records
untouched), framing Fetch answers into pieces (control batches, partial batches, compacted batches
rebuilt), topic selection (include/exclude, internal topics, renaming, loop prevention), target topic
plans, offset translation from offset syncs, the Produce window (one batch per partition and request,
five in flight, sliding, resent after a failure), the fetch worker running ahead of the produce
worker into a bounded queue, and the security settings of named clusters reaching the
mirror's clients."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import make_batch

from kctl.client import ClientConfig, ConsumerConfig, ProducerConfig, TopicDescription, TopicPartition
from kctl.client.admin import PartitionInfo
from kctl.client.clusters_file import CLUSTERS_ENV
from kctl.client.security import SecuritySettings
from kctl.commands import mirror as mirror_command
from kctl.mirror import Mirror, MirrorSpec
from kctl.mirror.batches import frame_partition, restamp
from kctl.mirror.forwarder import Forwarder, MirrorError, PartitionState, producer_properties
from kctl.mirror.mirror import _SourceRun
from kctl.mirror.offset_syncs import OffsetSync, OffsetSyncStore, decode_sync, encode_sync
from kctl.mirror.topics import TopicPolicy, plan_topics
from kctl.protocol import ErrorCode
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import iter_headers, parse_header, set_base_offset, validate_batch
from kctl.records.reader import decode_records
from kctl.testing import wait_for


def at(batch: bytes, base_offset: int) -> bytes:
    data = bytearray(batch)
    set_base_offset(data, 0, base_offset)
    return bytes(data)


def test_restamp_changes_only_the_header_and_keeps_a_valid_crc() -> None:
    builder = RecordBatchBuilder(
        compression="lz4", producer_id=77, producer_epoch=3, base_sequence=40, base_offset=500
    )
    for i in range(5):
        builder.append(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)])
    source = builder.build()
    piece = frame_partition(source, 500).pieces[0]
    stamped = restamp(piece, 1234, 7, 99)
    header = validate_batch(stamped)  # raises on a bad CRC
    assert (header.base_offset, header.producer_id, header.producer_epoch, header.base_sequence) == (
        0,
        1234,
        7,
        99,
    )
    assert header.partition_leader_epoch == -1
    assert header.compression == parse_header(source).compression
    assert stamped[61:] == source[61:]  # the (compressed) records are the source's bytes
    before = [
        (r.timestamp, r.key, r.value, r.headers) for r in decode_records(source, 0, parse_header(source))
    ]
    after = [(r.timestamp, r.key, r.value, r.headers) for r in decode_records(stamped, 0, header)]
    assert after == before


def test_frame_skips_control_batches_and_a_trailing_partial_batch() -> None:
    data = at(make_batch(3), 0)
    control = RecordBatchBuilder(is_control=True, producer_id=5, producer_epoch=0, base_offset=3)
    control.append(1_700_000_000_000, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")
    third = at(make_batch(2), 4)
    framed = frame_partition(data + control.build() + third + third[:30], 0)
    assert [(p.source_offset, p.source_next, p.records_count) for p in framed.pieces] == [
        (0, 3, 3),
        (4, 6, 2),
    ]
    assert framed.next_offset == 6
    assert all(p.linear and not p.rebuilt for p in framed.pieces)


def test_frame_rebuilds_a_batch_that_starts_before_the_fetch_offset() -> None:
    framed = frame_partition(at(make_batch(10), 100), 104)
    (piece,) = framed.pieces
    assert (piece.source_offset, piece.source_next, piece.records_count, piece.rebuilt) == (104, 110, 6, True)
    records = decode_records(piece.data, 0, parse_header(piece.data))
    assert [r.key for r in records] == [b"key-%d" % i for i in range(4, 10)]


def test_frame_rebuilds_a_compacted_batch_as_not_linear() -> None:
    builder = RecordBatchBuilder(base_offset=10)
    for delta in (0, 3, 7):
        builder.append(1_700_000_000_000, b"k%d" % delta, b"v", offset_delta=delta)
    framed = frame_partition(builder.build(), 10)
    (piece,) = framed.pieces
    assert (piece.source_offset, piece.source_next, piece.records_count, piece.linear) == (10, 18, 3, False)
    assert parse_header(piece.data).last_offset_delta == 2  # contiguous: the target accepts it


def test_frame_of_nothing() -> None:
    framed = frame_partition(b"", 5)
    assert framed.pieces == [] and framed.next_offset is None


def test_topic_policy_selection_and_internal_topics() -> None:
    policy = TopicPolicy(include="orders.*|payments", exclude="orders-tmp")
    assert policy.reason_to_skip("orders", "agg") is None
    assert policy.reason_to_skip("orders-eu", "agg") is None
    assert policy.reason_to_skip("orders-tmp", "agg") == "excluded"
    assert policy.reason_to_skip("payments-x", "agg") == "not included"
    assert policy.reason_to_skip("__consumer_offsets", "agg") == "internal"
    assert policy.reason_to_skip("__kctl_mirror_offset_syncs", "agg") == "internal"
    assert policy.reason_to_skip("connect-offsets.internal", "agg") == "internal"
    assert TopicPolicy(include_internal=True).reason_to_skip("__x", "agg") is None


def test_rename_and_loop_prevention() -> None:
    policy = TopicPolicy(rename="{cluster}.{topic}")
    assert policy.target_topic("dc1", "orders") == "dc1.orders"
    assert policy.origin_clusters("dc1.agg.orders") == ["dc1", "agg"]
    assert policy.reason_to_skip("agg.orders", "agg") is not None  # came from agg: not back into it
    assert policy.reason_to_skip("dc1.agg.orders", "agg") is not None
    assert policy.reason_to_skip("dc2.orders", "agg") is None
    assert TopicPolicy().origin_clusters("agg.orders") == []  # no {cluster}: names say nothing
    with pytest.raises(ValueError):
        TopicPolicy(rename="{cluster}")
    with pytest.raises(KeyError):
        TopicPolicy(rename="{topic}.{other}")


def _topic(name: str, partitions: int) -> TopicDescription:
    return TopicDescription(
        name, partitions=tuple(PartitionInfo(p, 0, 0, (0,), (0,)) for p in range(partitions))
    )


def test_plan_topics() -> None:
    sources = [
        _topic("a", 3),
        _topic("b", 4),
        _topic("c", 2),
        _topic("d", 2),
        _topic("__consumer_offsets", 50),
    ]
    targets = {"b": _topic("b", 2), "c": _topic("c", 2), "d": _topic("d", 5)}
    actions, skipped = plan_topics(
        sources, targets, TopicPolicy(), "dc1", "agg", {"a": {"retention.ms": "5"}}
    )
    got = {a.source_topic: (a.target_topic, a.action, a.source_partitions, dict(a.configs)) for a in actions}
    assert got == {
        "a": ("a", "create", 3, {"retention.ms": "5"}),
        "b": ("b", "add-partitions", 4, {}),
        "c": ("c", "none", 2, {}),
        "d": ("d", "mismatch", 2, {}),
    }
    assert skipped == {"__consumer_offsets": "internal"}
    assert [a.one_to_one for a in actions] == [True, True, True, False]


def sync(source: int, target: int, linear: bool = True) -> OffsetSync:
    return OffsetSync("dc1", "orders", 0, source, "orders", target, linear)


def test_translate_linear_runs_gaps_and_restarts() -> None:
    # 0..99 -> 1000..1099; a gap in the source (100..149 compacted away): 150 -> 1100;
    # a restart at committed 180 writes 180.. again at 2000.
    store = OffsetSyncStore([sync(0, 1000), sync(150, 1100), sync(180, 2000)])
    assert store.translate("dc1", "orders", 0, 0) == ("orders", 1000)
    assert store.translate("dc1", "orders", 0, 42) == ("orders", 1042)
    assert store.translate("dc1", "orders", 0, 120) == ("orders", 1100)  # in the gap: the next record
    assert store.translate("dc1", "orders", 0, 160) == ("orders", 1110)
    assert store.translate("dc1", "orders", 0, 190) == ("orders", 2010)  # the copy written after the restart
    assert store.translate("dc1", "orders", 0, 500, mirrored=200) == ("orders", 2020)  # never past the mirror
    assert store.translate("dc1", "orders", 1, 5) is None
    assert OffsetSyncStore([sync(10, 0)]).translate("dc1", "orders", 0, 5) is None


def test_translate_a_rebuilt_batch_conservatively() -> None:
    store = OffsetSyncStore([sync(10, 500, linear=False), sync(18, 503)])
    assert store.translate("dc1", "orders", 0, 10) == ("orders", 500)
    assert store.translate("dc1", "orders", 0, 14) == ("orders", 501)  # re-reads, never skips
    assert store.translate("dc1", "orders", 0, 18) == ("orders", 503)


def test_sync_records_round_trip() -> None:
    original = sync(7, 9, linear=False)
    key, value = encode_sync(original)
    assert key == b"dc1/orders/0"
    assert decode_sync(value) == original
    assert decode_sync(b"not json") is None
    assert decode_sync(None) is None


SECURE_CLUSTERS = """
[dc1]
bootstrap.servers = "dc1.example.com:9093"
security.protocol = "SASL_SSL"
sasl.mechanism = "SCRAM-SHA-512"
sasl.username = "mirror"
sasl.password = "dc1-secret"
ssl.ca.location = "/etc/kctl/dc1-ca.pem"

[agg]
bootstrap.servers = "agg.example.com:9093"
security.protocol = "SSL"
ssl.ca.location = "/etc/kctl/agg-ca.pem"
ssl.certificate.location = "/etc/kctl/mirror.pem"
ssl.key.location = "/etc/kctl/mirror.key"
"request.timeout.ms" = 7000
"""


def test_security_settings_of_named_clusters_reach_every_client_of_the_mirror(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text(SECURE_CLUSTERS)
    monkeypatch.setenv(CLUSTERS_ENV, str(path))
    source = mirror_command._cluster("dc1", None, None, "--from")
    target = mirror_command._cluster("agg", None, ["client.id=mirror-x"], "--to")
    assert (source.alias, source.bootstrap_servers) == ("dc1", "dc1.example.com:9093")
    assert target.properties["client.id"] == "mirror-x"  # -X on top of the named cluster's properties
    dc1 = SecuritySettings(
        "SASL_SSL", "SCRAM-SHA-512", "mirror", "dc1-secret", ssl_ca_location="/etc/kctl/dc1-ca.pem"
    )
    agg = SecuritySettings(
        "SSL",
        ssl_ca_location="/etc/kctl/agg-ca.pem",
        ssl_certificate_location="/etc/kctl/mirror.pem",
        ssl_key_location="/etc/kctl/mirror.key",
    )
    mirror = Mirror(MirrorSpec([source], target))  # clients connect lazily: nothing is reached here
    run = _SourceRun(mirror, source)
    try:
        assert run.source.config.security == dc1  # fetching
        assert run.admin.cluster.config.security == dc1  # topics, configs, offsets, the mirror's group
        assert run.target.config.security == agg  # producing the forwarded batches
        assert mirror.target_admin.cluster.config.security == agg  # target topics, group translation
        assert run.target.config.request_timeout_ms == 7000
        # the producers of the keyed path and of the offset syncs, the offset syncs' consumer
        producer = ProducerConfig.from_properties(producer_properties(target.properties))
        assert producer.security == agg and producer.acks == -1 and producer.enable_idempotence
        assert ConsumerConfig.from_properties(target.properties).security == agg
        assert run.forwarder._target_properties == dict(target.properties)
    finally:
        mirror.close()


class _Sent:
    """What the fake connection's ``send`` returns (a real one: an InFlightRequest)."""

    def __init__(self, body: Any) -> None:
        self.body = body

    def time_left(self, timeout: float) -> float:
        return timeout


class _Target:
    """The target side of a Forwarder without a broker: records the Produce requests it is sent and
    answers them as a broker checking one producer's sequences on one partition does (written,
    DUPLICATE_SEQUENCE_NUMBER, OUT_OF_ORDER_SEQUENCE_NUMBER), or with the error codes a test
    queues in ``answers`` (None: answer as the broker would)."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.answers: list[int | None] = []
        self.written: list[int] = []  # base sequences, in the order written
        self.next_sequence = 0
        self.offset = 0
        self.before_answer: Any = lambda: None  # called before each answer

    # ClusterClient's surface the forwarder uses
    def leader_for(self, tp: TopicPartition, *, deadline: object = None) -> int:
        return 1

    def deadline(self, seconds: float | None = None) -> None:
        return None

    def mark_stale(self) -> None:
        pass

    def connection(self, node: int, *, deadline: object = None) -> _Target:
        return self

    config = ClientConfig()

    # BrokerConnection's surface
    def version_for(self, api_key: int, **kwargs: object) -> int:
        return 8

    def send(self, api_key: int, body: Any, version: int) -> Any:
        self.requests.append(body)
        return _Sent(body)

    def receive(self, request: _Sent, *, timeout: float | None = None) -> Any:
        self.before_answer()
        parts = []
        for topic in request.body.topic_data:
            for data in topic.partition_data:
                header = parse_header(data.records)
                code = self.answers.pop(0) if self.answers else None
                if code is None:
                    if header.base_sequence < self.next_sequence:
                        code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER
                    elif header.base_sequence > self.next_sequence:
                        code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                    else:
                        code = ErrorCode.NONE
                base_offset = self.offset
                if code == ErrorCode.NONE:
                    self.written.append(header.base_sequence)
                    self.next_sequence = header.base_sequence + header.records_count
                    self.offset += header.records_count
                parts.append(SimpleNamespace(index=data.index, error_code=code, base_offset=base_offset))
        return SimpleNamespace(responses=[SimpleNamespace(name="orders", partition_responses=parts)])


def test_produce_window_one_batch_per_partition_five_in_flight_sliding_and_resent_after_a_failure() -> None:
    target = _Target()
    syncs: list[OffsetSync] = []
    forwarder = Forwarder(
        "dc1",
        None,  # type: ignore[arg-type]  # the source is not used by the produce path
        target,  # type: ignore[arg-type]
        "agg",
        target_properties={},
        target_bootstrap="agg:9092",
        on_sync=syncs.append,
    )
    forwarder.producer_id, forwarder.producer_epoch = 42, 0
    state = PartitionState(TopicPartition("orders", 0), TopicPartition("orders", 0), 0, 0)
    forwarder.add_partition(state)
    data = b"".join(at(make_batch(3), 3 * n) for n in range(12))  # 12 source batches of 3 records
    for piece in frame_partition(data, 0).pieces:
        state.queue.append(forwarder._stamp(state, piece))
        state.queued_bytes += len(state.queue[-1].data)

    def sent_sequences() -> list[int]:
        out = []
        for body in target.requests:
            (topic,) = body.topic_data
            (partition,) = topic.partition_data
            headers = list(iter_headers(partition.records))
            assert len(headers) == 1  # Kafka takes one batch per partition in a Produce (v3+)
            out.append(headers[0][1].base_sequence)
        target.requests.clear()
        return out

    forwarder._send_produces()
    assert sent_sequences() == [0, 3, 6, 9, 12]  # five in flight, in order
    forwarder._send_produces()
    assert sent_sequences() == []  # no more until answers come
    target.answers = [None, None, ErrorCode.NOT_LEADER_OR_FOLLOWER]  # the third refused
    forwarder._receive_produces()
    assert state.acked == 6 and forwarder.producer_id == 42  # two written; no new producer id
    assert sent_sequences() == [15, 18]  # the window slid after each of the two acknowledgements
    forwarder._send_produces()
    assert sent_sequences() == []  # after a failure: nothing until its answers are all in
    forwarder._receive_produces()  # 15 and 18: out of order (6 was refused), ignored
    assert state.acked == 6 and state.in_flight == 0 and not state.failed
    forwarder._send_produces()
    assert sent_sequences() == [6, 9, 12, 15, 18]  # the window again, same sequences
    forwarder._receive_produces()
    assert state.acked == 21 and sent_sequences() == [21, 24, 27, 30, 33]
    forwarder._receive_produces()
    assert state.acked == 36 and not state.queue and state.in_flight == 0 and state.queued_bytes == 0
    assert target.written == list(range(0, 36, 3))  # every batch written once, in order
    assert [s.source_offset for s in syncs] == [0] and forwarder.producer_id == 42


class _Source:
    """The source side of a Forwarder without a broker: a partition ``orders-0`` of ``batches``
    batches of 3 records; each Fetch returns one batch at the fetch offset. ``fetches`` counts the
    Fetch requests answered (the fetch worker's thread answers them)."""

    def __init__(self, batches: int, error_code: int = ErrorCode.NONE) -> None:
        self.log = [at(make_batch(3), 3 * n) for n in range(batches)]
        self.error_code = error_code
        self.fetches = 0
        self.on_fetch: Any = lambda: None  # called as each Fetch is answered

    def leader_for(self, tp: TopicPartition, *, deadline: object = None) -> int:
        return 1

    def deadline(self, seconds: float | None = None) -> None:
        return None

    def mark_stale(self) -> None:
        pass

    def connection(self, node: int, *, deadline: object = None) -> _Source:
        return self

    config = ClientConfig()
    frame_pool: object = None

    def use_frame_pool(self) -> object:
        self.frame_pool = object()  # the forwarder asks for one on its source connections
        return self.frame_pool

    def version_for(self, api_key: int, **kwargs: object) -> int:
        return 12

    def send(self, api_key: int, body: Any, version: int) -> Any:
        return body

    def receive(self, request: Any, *, timeout: float | None = None) -> Any:
        (topic,) = request.topics
        (partition,) = topic.partitions
        index = partition.fetch_offset // 3
        records = self.log[index] if index < len(self.log) else b""
        self.on_fetch()
        self.fetches += 1
        answer = SimpleNamespace(
            partition_index=0, error_code=self.error_code, high_watermark=3 * len(self.log), records=records
        )
        return SimpleNamespace(error_code=0, responses=[SimpleNamespace(topic="orders", partitions=[answer])])


def _pipelined_forwarder(source: _Source, target: _Target, **kwargs: Any) -> tuple[Forwarder, PartitionState]:
    forwarder = Forwarder(
        "dc1",
        source,  # type: ignore[arg-type]
        target,  # type: ignore[arg-type]
        "agg",
        target_properties={},
        target_bootstrap="agg:9092",
        on_sync=lambda sync: None,
        fetch_wait_ms=10,
        **kwargs,
    )
    forwarder.producer_id, forwarder.producer_epoch = 42, 0
    state = PartitionState(TopicPartition("orders", 0), TopicPartition("orders", 0), 0, 0)
    forwarder.add_partition(state)
    return forwarder, state


def test_fetch_worker_runs_ahead_of_unanswered_produces_into_a_bounded_queue() -> None:
    """Fetching and producing overlap: while the target has not answered the first Produce, the
    fetch worker goes on fetching — up to the queue bound, then it waits — and nothing counts as
    acknowledged; once answers come, every batch is written once, in order."""
    source, target = _Source(40), _Target()
    batch_size = len(source.log[0])
    forwarder, state = _pipelined_forwarder(source, target, max_queued_bytes=8 * batch_size)
    observed: dict[str, int] = {}
    queued_at_fetch: list[int] = []
    source.on_fetch = lambda: queued_at_fetch.append(state.queued_bytes)

    def first_answer_waits_for_the_fetch_worker() -> None:
        if not observed:
            wait_for(lambda: state.queued_bytes >= 8 * batch_size, "the fetch worker to fill the queue", 10)
            observed.update(fetches=source.fetches, acked=state.acked)

    target.before_answer = first_answer_waits_for_the_fetch_worker
    forwarder.start()
    try:
        wait_for(lambda: (forwarder.run_once(), state.acked == 120)[1], "every batch acknowledged", 10)
    finally:
        forwarder.stop_fetching()
    assert observed["fetches"] >= 8 and observed["acked"] == 0  # ran ahead; nothing acked meanwhile
    assert max(queued_at_fetch) < 8 * batch_size  # a full queue is not fetched for: bounded
    assert target.written == list(range(0, 120, 3))  # every batch written once, in order
    assert not state.queue and state.queued_bytes == 0 and state.position == 120
    assert source.frame_pool is not None  # Fetch answers into reused buffers (kctl.protocol.FramePool)


def test_a_fetch_worker_error_is_raised_by_the_produce_worker() -> None:
    source = _Source(4, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    forwarder, _ = _pipelined_forwarder(source, _Target())
    forwarder.start()
    try:
        with pytest.raises(MirrorError, match=r"source dc1: topic orders-0: .*TOPIC_AUTHORIZATION_FAILED"):
            wait_for(lambda: forwarder.run_once() and False, "the fetch error", 10)
    finally:
        forwarder.stop_fetching()


def test_restamp_in_place_rewrites_a_fetch_buffer_without_copying_and_again_for_a_new_producer_id() -> None:
    fetched = bytearray(b"".join(at(make_batch(3), 3 * n) for n in range(2)))  # a Fetch answer's buffer
    original = bytes(fetched)
    piece = frame_partition(memoryview(fetched), 3).pieces[0]
    stamped = restamp(piece, 42, 0, 7, in_place=True)
    assert isinstance(stamped, memoryview) and stamped.obj is fetched  # the buffer itself
    header = validate_batch(stamped)
    assert (header.producer_id, header.base_sequence, header.base_offset) == (42, 7, 0)
    assert fetched[: len(original) // 2] == original[: len(original) // 2]  # the other batch untouched
    assert bytes(stamped[61:]) == original[len(original) // 2 + 61 :]  # the records untouched
    again = validate_batch(restamp(piece, 43, 1, 0, in_place=True))  # renumbered after a new producer id
    assert (again.producer_id, again.producer_epoch, again.base_sequence) == (43, 1, 0)
    readonly = frame_partition(memoryview(original), 3).pieces[0]
    assert restamp(readonly, 42, 0, 7, in_place=True) is not readonly.data  # read-only bytes: a copy


def test_a_new_producer_id_while_the_fetch_worker_restamps_a_piece_numbers_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fetch worker restamps outside the lock; a producer id renewed meanwhile (by the produce
    worker) must not leave that piece with the old id or a sequence out of the new numbering."""
    from kctl.mirror import forwarder as forwarder_module

    forwarder, state = _pipelined_forwarder(_Source(0), _Target())
    first, second = frame_partition(b"".join(at(make_batch(3), 3 * n) for n in range(2)), 0).pieces
    forwarder._queue_piece(state, first)
    real_restamp = forwarder_module.restamp

    def renewed_meanwhile(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(forwarder_module, "restamp", real_restamp)  # once
        forwarder._renumber(43, 1)  # what the produce worker's InitProducerId does
        return real_restamp(*args, **kwargs)

    monkeypatch.setattr(forwarder_module, "restamp", renewed_meanwhile)
    forwarder._queue_piece(state, second)
    headers = [validate_batch(unit.data) for unit in state.queue]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [(43, 1, 0), (43, 1, 3)]
    assert [unit.sequence for unit in state.queue] == [0, 3] and state.next_sequence == 6

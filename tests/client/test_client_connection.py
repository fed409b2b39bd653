"""kctl.client pieces that need no kctl broker: addresses, version negotiation, error mapping, config,
`BrokerConnection` against a scripted Kafka peer on a real loopback socket (handshake fallback,
pipelining, timeouts, a peer that hangs up or sends garbage), and the admin client's retries of
NOT_CONTROLLER / NOT_LEADER_OR_FOLLOWER against such a peer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kctl.client import (
    AdminClient,
    BrokerConnection,
    BrokerResponseError,
    ClientConfig,
    ClientConfigError,
    IncompatibleBrokerError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
    NewTopic,
    negotiate_version,
    parse_bootstrap,
    raise_for_errors,
)
from kctl.client.admin import AdminOperationError, CreateTopicResult, OffsetResult, Result
from kctl.client.cluster import RETRIABLE_CODES, ClusterClient, Deadline, is_retriable
from kctl.client.connection import parse_address
from kctl.client.consumer.offsets import offset_timestamp
from kctl.client.errors import check_error
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import (
    ApiKey,
    ErrorCode,
    FrameReceiver,
    api_versions_error_response,
    codec_version_ranges,
    decode_request,
    encode_response,
)
from kctl.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from kctl.protocol.messages.create_topics import CreatableTopicResult, CreateTopicsResponse
from kctl.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kctl.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kctl.protocol.messages.produce import ProduceRequest

# ------------------------------------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("localhost:9093", ("localhost", 9093)),
        ("127.0.0.1", ("127.0.0.1", 9092)),
        ("[::1]:19092", ("::1", 19092)),
        ("::1", ("::1", 9092)),
        ("PLAINTEXT://broker-1:9092", ("broker-1", 9092)),
        (" host:1 ", ("host", 1)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["", "host:abc", "host:0", "host:70000", ":9092", "[::1", "a:b:c"])
def test_parse_address_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)


def test_parse_bootstrap_splits_and_dedups() -> None:
    assert parse_bootstrap("a:1, b:2,a:1,") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["a:1,b", "c:3"]) == [("a", 1), ("b", 9092), ("c", 3)]
    with pytest.raises(ValueError):
        parse_bootstrap(" , ")


# ------------------------------------------------------------------------------------------- versions


def test_negotiate_picks_highest_common_version() -> None:
    ours = {3: (0, 12), 19: (0, 7)}
    assert negotiate_version(3, {3: (0, 9)}, ours) == 9
    assert negotiate_version(3, {3: (4, 20)}, ours) == 12
    assert negotiate_version(3, {3: (0, 20)}, ours, max_version=8) == 8
    assert negotiate_version(3, {3: (0, 20)}, ours, min_version=12) == 12


def test_negotiate_defaults_to_the_codec_ranges() -> None:
    ours = codec_version_ranges()
    assert negotiate_version(ApiKey.METADATA, {ApiKey.METADATA: (0, 99)}) == ours[ApiKey.METADATA][1]


def test_negotiate_failures_are_incompatible_broker_errors() -> None:
    ours = {3: (0, 12)}
    with pytest.raises(IncompatibleBrokerError, match="does not support Metadata") as info:
        negotiate_version(3, {}, ours)
    assert info.value.api_key == 3
    with pytest.raises(IncompatibleBrokerError, match="no common version of Metadata"):
        negotiate_version(3, {3: (13, 15)}, ours)
    with pytest.raises(IncompatibleBrokerError, match="no common version"):
        negotiate_version(3, {3: (0, 5)}, ours, min_version=7)
    with pytest.raises(IncompatibleBrokerError, match="cannot encode"):
        negotiate_version(99, {99: (0, 1)}, ours)


# ------------------------------------------------------------------------------------------- errors


def test_broker_response_error_maps_codes_to_kafka_names() -> None:
    error = BrokerResponseError(3)
    assert (error.code, error.name, error.retriable) == (3, "UNKNOWN_TOPIC_OR_PARTITION", True)
    assert error.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert str(error) == "UNKNOWN_TOPIC_OR_PARTITION: " + ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.description
    named = BrokerResponseError(36, "topic 'a' exists", context="topic 'a'")
    assert str(named) == "topic 'a': TOPIC_ALREADY_EXISTS: topic 'a' exists"
    assert not named.retriable
    unknown = BrokerResponseError(4242)
    assert unknown.name == "UNKNOWN_ERROR_CODE_4242" and unknown.error is None
    assert "4242" in str(unknown)
    check_error(0)
    with pytest.raises(BrokerResponseError) as info:
        check_error(41, "moved")
    assert info.value.name == "NOT_CONTROLLER" and info.value.retriable


def test_retry_policy() -> None:
    assert ErrorCode.NOT_CONTROLLER in RETRIABLE_CODES
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER in RETRIABLE_CODES
    assert ErrorCode.LEADER_NOT_AVAILABLE in RETRIABLE_CODES
    assert is_retriable(BrokerResponseError(ErrorCode.LEADER_NOT_AVAILABLE))
    assert not is_retriable(BrokerResponseError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    assert is_retriable(BrokerResponseError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), {3})
    assert not is_retriable(BrokerResponseError(ErrorCode.TOPIC_ALREADY_EXISTS))
    assert is_retriable(KafkaConnectionError("x"))
    assert is_retriable(KafkaTimeoutError("x"))
    assert not is_retriable(KafkaProtocolError("x"))
    assert not is_retriable(ValueError("x"))


def test_raise_for_errors_reports_the_first_failure_and_keeps_all() -> None:
    ok = Result("a")
    exists = CreateTopicResult("b", ErrorCode.TOPIC_ALREADY_EXISTS, "topic 'b' already exists")
    bad = CreateTopicResult("c", ErrorCode.INVALID_PARTITIONS, None)
    raise_for_errors([ok])
    raise_for_errors([ok, exists], ignore={"TOPIC_ALREADY_EXISTS"})
    raise_for_errors([exists], ignore={ErrorCode.TOPIC_ALREADY_EXISTS})
    with pytest.raises(AdminOperationError) as info:
        raise_for_errors([ok, exists, bad])
    assert info.value.name == "TOPIC_ALREADY_EXISTS"
    assert info.value.failures == [exists, bad]
    assert str(info.value) == "b (and 1 more): TOPIC_ALREADY_EXISTS: topic 'b' already exists"
    tp = TopicPartition("t", 0)
    with pytest.raises(AdminOperationError, match="t-0: NOT_LEADER"):
        raise_for_errors({tp: OffsetResult(tp, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)})
    assert exists.error == "TOPIC_ALREADY_EXISTS" and not exists.ok and ok.error is None


def test_offset_specs() -> None:
    assert offset_timestamp("earliest") == -2
    assert offset_timestamp("LATEST") == -1
    assert offset_timestamp("max-timestamp") == -3
    assert offset_timestamp("1700000000000") == 1_700_000_000_000
    assert offset_timestamp(5) == 5
    for bad in ("soon", -7, True):
        with pytest.raises(ValueError):
            offset_timestamp(bad)  # type: ignore[arg-type]


def test_client_config_from_kafka_properties() -> None:
    config = ClientConfig.from_properties(
        {"client.id": "tool", "request.timeout.ms": "5000", "bootstrap.servers": "x:1", "acks": "all"}
    )
    assert config.client_id == "tool"
    assert config.request_timeout == 5.0
    assert config.unknown == ("acks",)
    assert ClientConfig().request_timeout_ms == 30_000
    with pytest.raises(ClientConfigError, match=r"request\.timeout\.ms"):
        ClientConfig.from_properties({"request.timeout.ms": "soon"})
    with pytest.raises(ClientConfigError, match="at least 1"):
        ClientConfig.from_properties({"request.timeout.ms": "0"})
    with pytest.raises(ClientConfigError, match="PLAINTEXT"):
        ClientConfig.from_properties({"security.protocol": "TLS"})  # not a protocol: the valid ones listed
    assert ClientConfig(retry_backoff_ms=500, retry_backoff_max_ms=100).retry_backoff_max_ms == 500


def test_deadline() -> None:
    deadline = Deadline(10)
    assert 9 < deadline.remaining() <= 10
    assert deadline.timeout(2) == 2
    assert not deadline.expired
    past = Deadline(-1)
    assert past.expired and past.remaining() == 0 and past.timeout(5) == 0.001


# ------------------------------------------------------------------------------------------- a scripted peer

BROKER_VERSIONS = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 9), ApiKey.PRODUCE: (3, 9)}

Handler = Callable[[Any, Any, socket.socket], None]


def api_versions_ok(
    header: Any, sock: socket.socket, versions: dict[int, tuple[int, int]] | None = None
) -> None:
    ranges = versions or BROKER_VERSIONS
    body = ApiVersionsResponse(
        error_code=0, api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in ranges.items()], throttle_time_ms=0
    )
    sock.sendall(encode_response(header, body))


def metadata_ok(header: Any, sock: socket.socket, cluster_id: str = "c1") -> None:
    sock.sendall(
        encode_response(header, MetadataResponse(brokers=[], cluster_id=cluster_id, controller_id=-1))
    )


class Peer:
    """A loopback server speaking Kafka frames through the sans-io codec; `handler(header, body,
    sock)` answers (or not) each request of the one connection it accepts."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[tuple[int, int, int]] = []  # (api key, version, correlation id)
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        reader = FrameReceiver()
        with sock:
            try:
                while True:
                    data = sock.recv(65536)
                    if not data:
                        return
                    for frame in reader.feed(data):
                        try:
                            header, body = decode_request(frame)
                        except Exception as error:  # an unsupported ApiVersions version
                            header, body = error, None
                        if not isinstance(header, BaseException):
                            self.requests.append((header.api_key, header.api_version, header.correlation_id))
                        if self.handler(header, body, sock) is False:
                            return
            except OSError:
                return
            except BaseException as error:
                self.errors.append(error)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def peer() -> Iterator[Callable[[Handler], Peer]]:
    peers: list[Peer] = []

    def make(handler: Handler) -> Peer:
        peers.append(Peer(handler))
        return peers[-1]

    yield make
    for p in peers:
        p.close()
        assert not p.errors, p.errors


def standard(header: Any, body: Any, sock: socket.socket) -> None:
    if header.api_key == ApiKey.API_VERSIONS:
        api_versions_ok(header, sock)
    elif header.api_key == ApiKey.METADATA:
        metadata_ok(header, sock, f"cluster-{header.correlation_id}")


def test_handshake_remembers_broker_ranges_and_negotiates(peer: Callable[[Handler], Peer]) -> None:
    p = peer(standard)
    with BrokerConnection("127.0.0.1", p.port, client_id="t", timeout=5) as conn:
        assert conn.api_versions_version == 3
        assert conn.broker_versions == BROKER_VERSIONS
        assert conn.version_for(ApiKey.METADATA) == 9
        assert conn.supports(ApiKey.METADATA, 9) and not conn.supports(ApiKey.METADATA, 10)
        assert not conn.supports(ApiKey.FETCH)
        response = conn.request(ApiKey.METADATA, MetadataRequest(topics=None))
        assert response.cluster_id == "cluster-2"
        assert conn.request(ApiKey.METADATA, MetadataRequest(topics=[]), version=1).controller_id == -1
        with pytest.raises(IncompatibleBrokerError, match="Metadata v10"):
            conn.request(ApiKey.METADATA, MetadataRequest(topics=None), version=10)
        with pytest.raises(IncompatibleBrokerError, match="does not support Fetch"):
            conn.send(ApiKey.FETCH, {})
        assert not conn.closed  # a refused version does not spoil the connection
    assert p.requests[:3] == [(18, 3, 1), (3, 9, 2), (3, 1, 3)]
    assert conn.closed


def test_handshake_falls_back_to_the_brokers_api_versions_range(peer: Callable[[Handler], Peer]) -> None:
    def old_broker(header: Any, body: Any, sock: socket.socket) -> None:
        if isinstance(header, BaseException) or header.api_version > 2:
            correlation = header.correlation_id
            sock.sendall(api_versions_error_response(correlation, {18: (0, 2), 3: (0, 5)}))
        elif header.api_key == ApiKey.API_VERSIONS:
            api_versions_ok(header, sock, {18: (0, 2), 3: (0, 5)})

    p = peer(old_broker)
    with BrokerConnection("127.0.0.1", p.port, timeout=5) as conn:
        assert conn.api_versions_version == 2
        assert conn.broker_versions == {18: (0, 2), 3: (0, 5)}
        assert conn.version_for(ApiKey.METADATA) == 5


def test_handshake_falls_back_to_v0_when_the_broker_lists_nothing(peer: Callable[[Handler], Peer]) -> None:
    def ancient(header: Any, body: Any, sock: socket.socket) -> None:
        if isinstance(header, BaseException) or header.api_version > 0:
            sock.sendall(api_versions_error_response(header.correlation_id, []))
        else:
            api_versions_ok(header, sock, {18: (0, 0), 3: (0, 1)})

    p = peer(ancient)
    with BrokerConnection("127.0.0.1", p.port, timeout=5) as conn:
        assert conn.api_versions_version == 0
    assert [r[1] for r in p.requests if r[0] == 18][-1] == 0


def test_pipelined_requests_are_matched_in_order(peer: Callable[[Handler], Peer]) -> None:
    held: list[Any] = []

    def batching(header: Any, body: Any, sock: socket.socket) -> None:
        if header.api_key == ApiKey.API_VERSIONS:
            api_versions_ok(header, sock)
            return
        held.append(header)
        if len(held) == 3:  # answer all three at once, in one write
            sock.sendall(
                b"".join(
                    encode_response(h, MetadataResponse(brokers=[], cluster_id=f"c{h.correlation_id}"))
                    for h in held
                )
            )

    p = peer(batching)
    with BrokerConnection("127.0.0.1", p.port, timeout=5) as conn:
        a = conn.send(ApiKey.METADATA, MetadataRequest(topics=None))
        b = conn.send(ApiKey.METADATA, MetadataRequest(topics=None))
        c = conn.send(ApiKey.METADATA, MetadataRequest(topics=None))
        assert conn.in_flight == 3
        # asking for the last one first keeps the earlier responses for their own receive calls
        assert conn.receive(c).cluster_id == f"c{c.correlation_id}"
        assert conn.receive(a).cluster_id == f"c{a.correlation_id}"
        assert conn.receive().cluster_id == f"c{b.correlation_id}"
        assert conn.in_flight == 0
        with pytest.raises(ValueError, match="not in flight"):
            conn.receive(a)
        with pytest.raises(ValueError, match="no request is in flight"):
            conn.receive()


def test_produce_with_acks_0_expects_no_response(peer: Callable[[Handler], Peer]) -> None:
    p = peer(standard)
    with BrokerConnection("127.0.0.1", p.port, timeout=5) as conn:
        request = conn.send(ApiKey.PRODUCE, ProduceRequest(acks=0, timeout_ms=100, topic_data=[]))
        assert not request.expect_response and conn.in_flight == 0
        assert conn.receive(request) is None
        # the connection stays in step: the next response is matched to its request
        assert conn.request(ApiKey.METADATA, MetadataRequest(topics=None)).cluster_id.startswith("cluster-")


def test_a_silent_broker_times_out_and_closes_the_connection(peer: Callable[[Handler], Peer]) -> None:
    def silent(header: Any, body: Any, sock: socket.socket) -> None:
        if header.api_key == ApiKey.API_VERSIONS:
            api_versions_ok(header, sock)

    p = peer(silent)
    conn = BrokerConnection("127.0.0.1", p.port, timeout=5)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="timed out waiting"):
        conn.request(ApiKey.METADATA, MetadataRequest(topics=None), timeout=0.3)
    assert time.monotonic() - started < 3
    assert conn.closed
    with pytest.raises(KafkaConnectionError, match="closed"):
        conn.request(ApiKey.METADATA, MetadataRequest(topics=None))


def test_a_silent_handshake_times_out_within_the_connect_timeout(peer: Callable[[Handler], Peer]) -> None:
    p = peer(lambda header, body, sock: None)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        BrokerConnection("127.0.0.1", p.port, timeout=30, connect_timeout=0.3)
    assert time.monotonic() - started < 3


def test_the_broker_hanging_up_is_a_connection_error(peer: Callable[[Handler], Peer]) -> None:
    def hang_up(header: Any, body: Any, sock: socket.socket) -> bool | None:
        if header.api_key == ApiKey.API_VERSIONS:
            api_versions_ok(header, sock)
            return None
        return False  # close the socket

    p = peer(hang_up)
    conn = BrokerConnection("127.0.0.1", p.port, timeout=5)
    with pytest.raises(KafkaConnectionError, match="closed the connection"):
        conn.request(ApiKey.METADATA, MetadataRequest(topics=None))
    assert conn.closed


def test_a_mismatched_correlation_id_is_a_protocol_error(peer: Callable[[Handler], Peer]) -> None:
    def confused(header: Any, body: Any, sock: socket.socket) -> None:
        if header.api_key == ApiKey.API_VERSIONS:
            api_versions_ok(header, sock)
        else:
            header.correlation_id += 100
            metadata_ok(header, sock)

    p = peer(confused)
    conn = BrokerConnection("127.0.0.1", p.port, timeout=5)
    with pytest.raises(KafkaProtocolError, match="correlation id"):
        conn.request(ApiKey.METADATA, MetadataRequest(topics=None))
    assert conn.closed


def test_a_negative_frame_size_is_a_protocol_error(peer: Callable[[Handler], Peer]) -> None:
    def garbage(header: Any, body: Any, sock: socket.socket) -> None:
        if header.api_key == ApiKey.API_VERSIONS:
            api_versions_ok(header, sock)
        else:
            sock.sendall(b"\xff\xff\xff\xf0junk")

    p = peer(garbage)
    conn = BrokerConnection("127.0.0.1", p.port, timeout=5)
    with pytest.raises(KafkaProtocolError, match="bad frame"):
        conn.request(ApiKey.METADATA, MetadataRequest(topics=None))


def test_an_api_versions_error_is_a_broker_response_error(peer: Callable[[Handler], Peer]) -> None:
    def refusing(header: Any, body: Any, sock: socket.socket) -> None:
        sock.sendall(
            encode_response(header, ApiVersionsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        )

    p = peer(refusing)
    with pytest.raises(BrokerResponseError, match="CLUSTER_AUTHORIZATION_FAILED"):
        BrokerConnection("127.0.0.1", p.port, timeout=5)


def test_nothing_listening_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        with pytest.raises(KafkaConnectionError, match="cannot connect") as info:
            BrokerConnection("127.0.0.1", port, timeout=5)
    assert (info.value.host, info.value.port) == ("127.0.0.1", port)


def test_cluster_client_fails_fast_when_no_bootstrap_server_answers() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        cluster = ClusterClient(f"{address},{address}", default_api_timeout_ms=30_000)
        started = time.monotonic()
        with pytest.raises(KafkaConnectionError, match="cannot reach any broker"):
            cluster.retry(lambda: cluster.refresh_metadata())
        assert time.monotonic() - started < 5
        cluster.close()


def test_cluster_client_retries_until_the_deadline_when_asked() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        cluster = ClusterClient(f"127.0.0.1:{s.getsockname()[1]}", retry_bootstrap=True, retry_backoff_ms=50)
        started = time.monotonic()
        with pytest.raises(KafkaConnectionError):
            cluster.retry(lambda: cluster.refresh_metadata(), deadline=Deadline(0.5))
        # it retried rather than failing at once: it stops once the next backoff (50, 100, 200,
        # 400 ms, each +-20 %) would pass the deadline, so after 0.28 s at the earliest
        assert 0.25 < time.monotonic() - started < 5


# ------------------------------------------------------------------------------------------- retries


def scripted_cluster(
    peer: Callable[[Handler], Peer], answer: Callable[[Any, Any], Any]
) -> tuple[Peer, list[Any]]:
    """A one-broker 'cluster' (broker 0, the controller, topic t with 2 partitions led by 0) whose
    answers to other APIs come from `answer(header, body)`; returns the peer and the bodies received."""
    received: list[Any] = []
    port: dict[str, int] = {}

    def handler(header: Any, body: Any, sock: socket.socket) -> None:
        if header.api_key == ApiKey.API_VERSIONS:
            api_versions_ok(header, sock, {18: (0, 4), 3: (0, 12), 2: (0, 8), 19: (0, 7)})
        elif header.api_key == ApiKey.METADATA:
            partitions = [
                MetadataResponsePartition(partition_index=i, leader_id=0, replica_nodes=[0], isr_nodes=[0])
                for i in range(2)
            ]
            response = MetadataResponse(
                brokers=[MetadataResponseBroker(node_id=0, host="127.0.0.1", port=port["port"])],
                cluster_id="c",
                controller_id=0,
                topics=[MetadataResponseTopic(name="t", partitions=partitions)],
            )
            sock.sendall(encode_response(header, response))
        else:
            received.append(body)
            sock.sendall(encode_response(header, answer(header, body)))

    p = peer(handler)
    port["port"] = p.port
    return p, received


def test_admin_retries_only_the_topics_that_hit_not_controller(peer: Callable[[Handler], Peer]) -> None:
    def answer(header: Any, body: Any) -> CreateTopicsResponse:
        first = len(received) == 1
        return CreateTopicsResponse(
            topics=[
                CreatableTopicResult(
                    name=t.name,
                    error_code=ErrorCode.NOT_CONTROLLER if first and t.name == "a" else 0,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                )
                for t in body.topics
            ]
        )

    p, received = scripted_cluster(peer, answer)
    with AdminClient(f"127.0.0.1:{p.port}", retry_backoff_ms=10) as admin:
        results = admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 2, 1)])
    assert [(r.name, r.ok, r.num_partitions) for r in results] == [("a", True, 1), ("b", True, 2)]
    assert [[t.name for t in body.topics] for body in received] == [["a", "b"], ["a"]]


def test_admin_gives_up_at_the_deadline_with_the_last_error(peer: Callable[[Handler], Peer]) -> None:
    def answer(header: Any, body: Any) -> CreateTopicsResponse:
        return CreateTopicsResponse(
            topics=[
                CreatableTopicResult(name=t.name, error_code=ErrorCode.NOT_CONTROLLER) for t in body.topics
            ]
        )

    p, received = scripted_cluster(peer, answer)
    started = time.monotonic()
    with AdminClient(f"127.0.0.1:{p.port}", retry_backoff_ms=20, retry_backoff_max_ms=50) as admin:
        [result] = admin.create_topics([NewTopic("a", 1, 1)], timeout=2.0)  # room for a loaded machine
    assert result.error == "NOT_CONTROLLER"
    assert 1.5 < time.monotonic() - started < 15
    assert len(received) >= 3


def test_list_offsets_retries_the_partitions_whose_leader_moved(peer: Callable[[Handler], Peer]) -> None:
    def answer(header: Any, body: Any) -> ListOffsetsResponse:
        first = len(received) == 1
        return ListOffsetsResponse(
            topics=[
                ListOffsetsTopicResponse(
                    name=t.name,
                    partitions=[
                        ListOffsetsPartitionResponse(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                            if first and p.partition_index == 1
                            else 0,
                            offset=10 + p.partition_index,
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )

    p, received = scripted_cluster(peer, answer)
    with AdminClient(f"127.0.0.1:{p.port}", retry_backoff_ms=10) as admin:
        offsets = admin.list_offsets([TopicPartition("t", 0), TopicPartition("t", 1)])
    assert {tp.partition: r.offset for tp, r in offsets.items()} == {0: 10, 1: 11}
    assert [[p.partition_index for t in b.topics for p in t.partitions] for b in received] == [[0, 1], [1]]

"""Helpers for the end-to-end tests: a raw Kafka connection over a plain socket (requests framed with
``kctl.protocol.encode_request`` or by hand), the health check every bad-input test ends with, a
module-scoped broker, and runners for the independent tools (kcat, the ``kctl`` CLI).

Nothing here sleeps to synchronise: waits block on a socket with a timeout or poll a condition until
a deadline.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import kctl.protocol as kp
from kctl.protocol.messages.api_versions import ApiVersionsRequest
from kctl.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import RecordBatchBuilder
from kctl.testing import BrokerProcess

IO_TIMEOUT = 10.0
KCAT = "/usr/bin/kcat"

_INT32 = struct.Struct(">i")


def unique(prefix: str) -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# ------------------------------------------------------------------------------------------- raw socket


class RawConnection:
    """One TCP connection to a broker; every blocking call has a timeout."""

    def __init__(self, bootstrap: str, *, client_id: str = "raw-e2e", timeout: float = IO_TIMEOUT) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._correlation = 0
        self._buffer = bytearray()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def header(self, api_key: int, api_version: int) -> kp.RequestHeader:
        return kp.RequestHeader(api_key, api_version, self.next_correlation_id(), self.client_id)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self, timeout: float = IO_TIMEOUT) -> bytes:
        """The next response frame (without its size prefix); raises ConnectionError on EOF."""
        self.sock.settimeout(timeout)
        while True:
            if len(self._buffer) >= 4:
                (size,) = _INT32.unpack_from(self._buffer, 0)
                if len(self._buffer) >= 4 + size:
                    frame = bytes(self._buffer[4 : 4 + size])
                    del self._buffer[: 4 + size]
                    return frame
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self._buffer += chunk

    def request(self, api_key: int, api_version: int, body: Any, *, timeout: float = IO_TIMEOUT) -> Any:
        """Send one request encoded by kctl.protocol and decode its response body."""
        header = self.header(api_key, api_version)
        self.send(kp.encode_request(header, body))
        frame = self.recv_frame(timeout)
        return kp.decode_response(header, frame)[1]

    def closed_by_peer(self, timeout: float = IO_TIMEOUT) -> bool:
        """True once the broker closes the connection (EOF or reset) within ``timeout``; any bytes that
        arrive first are collected in ``unexpected`` (a response where none was due)."""
        self.sock.settimeout(timeout)
        self.unexpected = b""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.unexpected += chunk
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return False


def frame(payload: bytes) -> bytes:
    return _INT32.pack(len(payload)) + payload


def request_header_v1(api_key: int, api_version: int, correlation_id: int, client_id: str = "raw") -> bytes:
    """A non-flexible request header (v1) written by hand."""
    cid = client_id.encode()
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(cid)) + cid


def api_versions(conn: RawConnection, version: int = 3) -> Any:
    body = (
        ApiVersionsRequest(client_software_name="raw-e2e", client_software_version="1.0")
        if version >= 3
        else ApiVersionsRequest()
    )
    return conn.request(kp.ApiKey.API_VERSIONS, version, body)


def metadata(conn: RawConnection, topics: list[str] | None = None, version: int = 12, **kw: Any) -> Any:
    body = MetadataRequest(
        topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=kw.get("allow_auto_topic_creation", False),
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return conn.request(kp.ApiKey.METADATA, version, body)


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
) -> int:
    """CreateTopics v5 for one topic; returns its error code."""
    body = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=10000,
        validate_only=False,
    )
    with RawConnection(bootstrap) as conn:
        response = conn.request(kp.ApiKey.CREATE_TOPICS, 5, body)
    [result] = response.topics
    return result.error_code


def record_batch(
    count: int = 3, *, value_size: int = 10, compression: str = "none", key: bytes = b"k"
) -> bytes:
    builder = RecordBatchBuilder(compression=compression)
    now = int(time.time() * 1000)
    for i in range(count):
        builder.append(now, key + b"%d" % i, (b"v%d-" % i).ljust(value_size, b"x"))
    return builder.build()


def produce_body(topic: str, partition: int, records: bytes, *, acks: int = 1) -> Any:
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=10000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=partition, records=records)]
            )
        ],
    )


def produce(
    bootstrap: str, topic: str, partition: int, records: bytes, *, acks: int = 1, version: int = 9
) -> Any:
    """Produce one batch on a fresh connection; returns the single partition response."""
    with RawConnection(bootstrap) as conn:
        response = conn.request(
            kp.ApiKey.PRODUCE, version, produce_body(topic, partition, records, acks=acks)
        )
    [topic_response] = response.responses
    [part] = topic_response.partition_responses
    return part


def assert_broker_healthy(broker: BrokerProcess) -> None:
    """The broker process is alive and a fresh client gets ApiVersions and Metadata answered."""
    assert broker.running, f"the broker died:\n{broker.log_tail()}"
    with RawConnection(broker.bootstrap, client_id="health-check") as conn:
        versions = api_versions(conn)
        assert versions.error_code == 0, versions
        keys = {v.api_key for v in versions.api_keys}
        assert {kp.ApiKey.PRODUCE, kp.ApiKey.FETCH, kp.ApiKey.METADATA} <= keys
        meta = metadata(conn)
        assert [b.port for b in meta.brokers] == [broker.port], meta
        assert meta.controller_id == 0
    assert broker.running, f"the broker died:\n{broker.log_tail()}"


# ------------------------------------------------------------------------------------------- processes


def start_module_broker(
    tmp_path_factory: pytest.TempPathFactory,
    properties: Mapping[str, str] | None = None,
    name: str = "broker",
) -> BrokerProcess:
    """A broker for a whole test module (the caller stops it)."""
    directory = tmp_path_factory.mktemp(name)
    return BrokerProcess(directory / "data", properties).start()


@contextlib.contextmanager
def running_broker(
    tmp_path_factory: pytest.TempPathFactory,
    properties: Mapping[str, str] | None = None,
    name: str = "broker",
) -> Iterator[BrokerProcess]:
    broker = start_module_broker(tmp_path_factory, properties, name)
    try:
        yield broker
    finally:
        broker.stop()


def log_size(broker: BrokerProcess) -> int:
    """Current size of the broker's stderr log (to look only at what a test caused)."""
    try:
        return broker.log_file.stat().st_size
    except OSError:
        return 0


def log_since(broker: BrokerProcess, position: int) -> str:
    with open(broker.log_file, "rb") as handle:
        handle.seek(position)
        return handle.read().decode("utf-8", "replace")


def run(
    argv: list[str], *, input: bytes | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, input=input, capture_output=True, timeout=timeout, check=False)


def kcat(
    bootstrap: str, *args: str, input: bytes | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[bytes]:
    """Run kcat against ``bootstrap``; fails the test if kcat exits with an error."""
    result = run([KCAT, "-b", bootstrap, *args], input=input, timeout=timeout)
    if result.returncode != 0:
        pytest.fail(
            f"kcat {' '.join(args)} exited with {result.returncode}\n"
            f"stdout: {result.stdout[-2000:]!r}\nstderr: {result.stderr[-4000:].decode(errors='replace')}"
        )
    return result


def kctl(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
    return run([sys.executable, "-m", "kctl", *args], timeout=timeout)


def dump_batches(partition_dir: Path) -> list[dict[str, Any]]:
    """`kctl log dump <dir> --format jsonl`: one dict per batch (fails the test on a non-zero exit)."""
    result = kctl("log", "dump", str(partition_dir), "--format", "jsonl")
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    rows = [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]
    return [row for row in rows if row.get("type") == "batch"]

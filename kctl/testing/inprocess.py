"""A broker in the test's own process, for testing API handlers where a process adds nothing.

``InProcessBroker`` builds a real ``kctl.broker.broker.Broker`` — its log manager, embedded registry
(one JSON document under the data directory: no ZooKeeper), metadata cache, replica manager, group
and transaction coordinators, authorizer — and starts it without listeners, on an event loop of its
own in a background thread. ``call(request)`` hands a request to the broker's dispatch as a
connection would: the request is encoded at the version asked (the handler's newest by default) and
decoded again, so the handler sees what it would see from the wire, and the response comes back
decoded from its encoding (a response holding file regions — Fetch — as the handler returned it).
A ``principal`` makes the request come from that authenticated principal (ACL tests).

What it does not test: sockets, framing, TLS, SASL exchanges, quotas' throttling of a connection,
replication between brokers. Use the ``broker`` / ``local_cluster_factory`` fixtures (real processes)
for those, and for anything a client library should see end to end.

The pytest plugin (kctl.testing.pytest_plugin) offers it as the ``inprocess_broker`` fixture
(embedded metadata, auto topic creation off, ``inprocess_broker_factory`` for other properties)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from kctl.broker.broker import Broker
from kctl.broker.config import BrokerConfig
from kctl.broker.request_context import RequestContext
from kctl.broker.security.sasl import Session
from kctl.protocol import (
    SCHEMAS,
    ProtocolEncodeError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kctl.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kctl.protocol.typed import ApiRequest

T = TypeVar("T")
R = TypeVar("R")

#: how long ``call`` waits for a handler (a handler parked longer is a failing test, not a slow one)
CALL_TIMEOUT_S = 60.0

_REQUEST_KEYS = {schema.request: key for key, schema in SCHEMAS.items()}


class InProcessBroker:
    """One broker without listeners in this process (module docstring). Close it (or use it as a
    context manager): it stops like a broker does, flushing and checkpointing its logs."""

    def __init__(self, directory: Path, properties: Mapping[str, str] | None = None) -> None:
        values = {
            "broker.id": "0",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(Path(directory) / "data"),
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            **(properties or {}),
        }
        self.config = BrokerConfig(values)
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="kctl-inprocess-broker", daemon=True
        )
        self._thread.start()
        try:
            self.broker: Broker = self._run(self._start())
        except BaseException:
            self._stop_loop()
            raise

    async def _start(self) -> Broker:
        broker = Broker(self.config)
        await broker.start(listen=False)
        return broker

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT_S) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def call(
        self,
        request: ApiRequest[R],
        *,
        version: int | None = None,
        principal: str | None = None,
        client_id: str = "kctl-inprocess",
        client_host: str = "127.0.0.1",
    ) -> R:
        """The broker's answer to ``request`` (an API's request dataclass) at ``version`` (default:
        the newest the broker answers), from ``principal`` if given (else outside any session:
        allowed everything), or None for a request answered with nothing (Produce acks=0)."""
        api_key = _REQUEST_KEYS.get(type(request))
        if api_key is None:
            raise TypeError(f"{type(request).__name__} is not a request class of kctl.protocol")
        low, high = self.broker.supported_versions[api_key]
        version = high if version is None else version
        if not low <= version <= high:
            raise ValueError(f"the broker answers {type(request).__name__} at v{low}-{high}, not v{version}")
        header = RequestHeader(api_key, version, next(self._ids), client_id)
        frame = encode_request(header, request)
        decoded_header, body = decode_request(memoryview(frame)[4:])
        session = Session.start(None, principal) if principal is not None else None
        context = RequestContext(decoded_header, client_host, 0, 0, session)
        response = self._run(self.broker.dispatch(context, body))
        if response is None:  # Produce acks=0 (its R includes None)
            return cast(R, None)
        try:
            encoded = encode_response(header, response)
        except ProtocolEncodeError:  # file regions (Fetch): as the handler returned them
            return response
        decoded: R = decode_response(header, memoryview(encoded)[4:])[1]
        return decoded

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        """Create ``name`` through CreateTopics (replication factor 1), waiting until it is served;
        raises RuntimeError with the broker's error otherwise."""
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=[],
                    configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
                )
            ],
            timeout_ms=int(CALL_TIMEOUT_S * 1000),
            validate_only=False,
        )
        [result] = self.call(request).topics
        if result.error_code != 0:
            raise RuntimeError(f"topic {name} not created: error {result.error_code} {result.error_message}")

    def close(self) -> None:
        """Stop the broker (flush, checkpoints, clean-shutdown marker) and its event loop."""
        try:
            self._run(self.broker.stop())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CALL_TIMEOUT_S)
        self._loop.close()

    def __enter__(self) -> InProcessBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

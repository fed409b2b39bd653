"""The producer's ``request.timeout.ms`` counts from each request's send, as Kafka's does, also for
requests pipelined on one connection: a receiver that read a late answer first must not give the
next request a whole timeout more. Found by the isolation nemesis (bench_jepsen --nemesis network
--network-fault isolate): the isolated leader's answer to the first of five Produce requests came
just before its timeout, each of the four others then waited five seconds more, and kctl's writer
got no acknowledgement for 10 s where another broker led after 5 s.

With the lab's isolation made faithful (the isolated leader's packets vanish both ways), kctl's
writer then waited 15 s: after the timeout its retry went to the same leader, whose connect heard
nothing, in the sender thread itself, for the whole connect timeout. So a broker is connected to in
the background, and a batch whose leader is not connected waits in its queue (not in flight), where
it goes to the next leader as soon as the metadata names one; meanwhile the metadata is asked for
again when that broker's last request or connect failed.

The receiver loop and the sender's plans are driven directly, with a connection that records the wait
it is given and a cluster that says which brokers are connected."""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest
from producer_plans import idempotent_producer, queue_batch

from kctl.client.connection import InFlightRequest
from kctl.client.errors import KafkaConnectionError, KafkaTimeoutError
from kctl.client.producer.accumulator import RecordAccumulator
from kctl.client.producer.sender import InFlightProduce, Sender
from kctl.client.producer_config import ProducerConfig
from kctl.protocol import ApiKey
from kctl.protocol.headers import RequestHeader

REQUEST_TIMEOUT_S = 5.0


class _SilentConnection:
    """Answers nothing: ``receive`` records the timeout it was given and times out at once."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def receive(self, in_flight: InFlightRequest, *, timeout: float) -> Any:
        self.timeouts.append(timeout)
        raise KafkaTimeoutError(f"timed out waiting for the answer to {in_flight.label}")


def _in_flight(correlation_id: int, sent_at: float) -> InFlightRequest:
    header = RequestHeader(ApiKey.PRODUCE, 9, correlation_id, "t")
    return InFlightRequest(correlation_id, ApiKey.PRODUCE, 9, header, True, sent_at)


def test_a_request_waits_for_its_answer_a_request_timeout_from_its_send() -> None:
    config = ProducerConfig.coerce({"request.timeout.ms": str(int(REQUEST_TIMEOUT_S * 1000))})
    sender = Sender(RecordAccumulator(config), None, config)  # type: ignore[arg-type]  # never connects
    connection = _SilentConnection()
    sender._node_in_flight[1] = 2
    work: queue.SimpleQueue[InFlightProduce | None] = queue.SimpleQueue()
    now = time.monotonic()
    # sent 4.5 s ago (the receiver was reading an earlier answer meanwhile), and one sent just now
    work.put(InFlightProduce(1, connection, _in_flight(1, now - 4.5), {}))
    work.put(InFlightProduce(1, connection, _in_flight(2, now), {}))
    work.put(None)
    sender._receive_loop(work)
    late, fresh = connection.timeouts
    assert late <= REQUEST_TIMEOUT_S - 4.5 + 0.25, "the wait of a request sent earlier started anew"
    assert fresh == pytest.approx(REQUEST_TIMEOUT_S, abs=0.25)
    assert sender._node_in_flight[1] == 0  # both failed, to be retried


def test_an_answer_already_here_is_read_even_past_the_timeout() -> None:
    assert _in_flight(1, time.monotonic() - 60).time_left(REQUEST_TIMEOUT_S) > 0


class _Cluster:
    """Which brokers are connected; connecting to any other fails as a cut-off host's does."""

    def __init__(self, connected: set[int]) -> None:
        self.connected = connected

    def is_connected(self, node: int) -> bool:
        return node in self.connected

    def connection(self, node: int, **kwargs: Any) -> Any:
        raise KafkaConnectionError(f"timed out connecting to broker {node}")


def test_a_batch_waits_for_its_leaders_connection_in_its_queue_and_goes_to_the_next_leader() -> None:
    accumulator, sender = idempotent_producer(_Cluster(connected={2}))
    now = time.monotonic()
    cut_off = queue_batch(accumulator, 0, now, leader=1)
    elsewhere = queue_batch(accumulator, 1, now, leader=2)

    plan = sender._plan(now)
    assert plan.requests == {2: [elsewhere]}, "a batch went to a broker not connected"
    assert plan.connect == [1] and not cut_off.in_flight
    assert sender._plan(now).connect == [], "one connect at a time per broker"

    sender._connect(1)  # it hears nothing: the metadata is asked for again
    assert 1 in sender._unanswered and accumulator._metadata_wanted
    sender._metadata_next = now
    plan = sender._plan(now)
    assert plan.want_metadata and plan.requests == {}

    accumulator._partitions[("t", 0)].leader = 2  # the metadata names the next leader
    plan = sender._plan(now)
    assert plan.requests == {2: [cut_off]}


def test_a_refused_connect_is_tried_again_after_a_backoff_not_at_once() -> None:
    accumulator, sender = idempotent_producer(_Cluster(connected=set()))
    now = time.monotonic()
    queue_batch(accumulator, 0, now, leader=1)
    assert sender._plan(now).connect == [1]
    sender._connect(1)  # refused
    backoff = sender._backoff
    plan = sender._plan(time.monotonic())
    assert plan.connect == [], "connected again at once: a broker that is down is dialed in a loop"
    assert plan.wait is not None and plan.wait <= backoff
    assert sender._plan(time.monotonic() + backoff).connect == [1]
    sender._connect(1)  # refused again: twice the backoff
    assert sender._plan(time.monotonic() + backoff).connect == []
    assert sender._plan(time.monotonic() + 2 * backoff).connect == [1]

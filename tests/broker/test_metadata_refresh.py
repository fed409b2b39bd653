"""Registry changes become metadata refreshes read off the event loop (kctl.broker.metadata_refresh):
the broker keeps answering while a refresh reads, reasons that come meanwhile make one refresh
more, and a fenced broker does not lead again on a read that a new fence overtook."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kctl.broker.metadata_refresh import MetadataRefresher
from kctl.protocol.messages.api_versions import ApiVersionsRequest
from kctl.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kctl.testing.inprocess import InProcessBroker
from kctl.zk.model import BrokerRegistration
from kctl.zk.registry import PARTITIONS, SESSION, TOPICS

WAIT_S = 20.0  # a liveness bound: what must happen comes within milliseconds


class HeldReads:
    """Makes the broker's registry block in ``topics()`` (the first read of a metadata refresh)
    while held."""

    def __init__(self, registry: Any) -> None:
        self._registry = registry
        self._read = registry.topics
        self.held = threading.Event()
        self.reading = threading.Event()
        self.release = threading.Event()
        registry.topics = self._topics

    def _topics(self) -> Any:
        if self.held.is_set():
            self.reading.set()
            self.release.wait(WAIT_S * 2)
        return self._read()

    def restore(self) -> None:
        self.release.set()
        self._registry.topics = self._read


@pytest.fixture
def held(inprocess_broker: InProcessBroker) -> Iterator[HeldReads]:
    reads = HeldReads(inprocess_broker.broker.metadata._registry)
    try:
        yield reads
    finally:
        reads.restore()


def _in_loop(inprocess: InProcessBroker, function: Any) -> Any:
    async def call() -> Any:
        return function()

    return asyncio.run_coroutine_threadsafe(call(), inprocess._loop).result(WAIT_S)


def test_the_broker_answers_while_a_metadata_refresh_reads(
    inprocess_broker: InProcessBroker, held: HeldReads
) -> None:
    broker = inprocess_broker.broker
    held.held.set()
    broker.refresher.notify(TOPICS)
    assert held.reading.wait(WAIT_S), "no refresh started"
    # the event loop runs while the read is held (before, the refresh read on the event loop)
    assert _in_loop(inprocess_broker, lambda: "served") == "served"
    answer = inprocess_broker.call(ApiVersionsRequest())
    assert answer.error_code == 0
    assert not held.release.is_set()
    held.release.set()
    inprocess_broker._run(broker.refresher.idle(), WAIT_S)


@pytest.mark.parametrize("fenced_meanwhile", [False, True])
def test_a_fence_during_the_read_keeps_the_broker_fenced(
    inprocess_broker: InProcessBroker, held: HeldReads, fenced_meanwhile: bool
) -> None:
    """A fenced broker leads again after a refresh, unless it was fenced anew while the refresh
    read (what it read may predate the session loss): then the next refresh decides."""
    broker = inprocess_broker.broker
    _in_loop(inprocess_broker, broker.replicas.fence)
    held.held.set()
    broker.refresher.notify(PARTITIONS)
    assert held.reading.wait(WAIT_S), "no refresh started"
    if fenced_meanwhile:
        _in_loop(inprocess_broker, broker.replicas.fence)
    held.held.clear()
    held.release.set()
    inprocess_broker._run(broker.refresher.idle(), WAIT_S)
    assert broker.replicas.fenced is fenced_meanwhile
    broker.refresher.notify(PARTITIONS)  # the next refresh reads anew: it leads again
    inprocess_broker._run(_settled(broker.refresher), WAIT_S)
    assert broker.replicas.fenced is False


async def _settled(refresher: MetadataRefresher) -> None:
    await asyncio.sleep(0)  # the notification's call_soon_threadsafe has run
    await refresher.idle()


def test_reasons_announced_during_a_refresh_make_one_more_refresh() -> None:
    async def scenario() -> tuple[list[tuple[str, ...]], list[str]]:
        refreshes: list[tuple[str, ...]] = []
        sessions: list[str] = []
        reading = asyncio.Event()
        release = asyncio.Event()

        async def refresh(*reasons: str) -> None:
            refreshes.append(reasons)
            reading.set()
            await release.wait()

        refresher = MetadataRefresher(refresh, lambda: sessions.append(f"after {len(refreshes)}"))
        refresher.attach(asyncio.get_running_loop())
        refresher.notify(TOPICS)
        await asyncio.wait_for(reading.wait(), WAIT_S)
        for reason in (PARTITIONS, TOPICS, PARTITIONS, SESSION):
            await asyncio.to_thread(refresher.notify, reason)  # from another thread, as the registry
        await asyncio.sleep(0)
        assert sessions == ["after 1"], "the session change waited behind the refresh"
        release.set()
        await asyncio.wait_for(refresher.idle(), WAIT_S)
        await refresher.stop()
        refresher.notify(TOPICS)  # stopped: ignored
        await asyncio.sleep(0)
        return refreshes, sessions

    refreshes, sessions = asyncio.run(scenario())
    assert refreshes == [(TOPICS,), (PARTITIONS, TOPICS)]
    assert sessions == ["after 1"]


def test_replicas_are_placed_on_brokers_registered_while_a_refresh_reads(
    inprocess_broker: InProcessBroker, held: HeldReads
) -> None:
    """A broker registered a moment ago counts for CreateTopics and CreatePartitions even while the
    refresh that will show it in the metadata cache is still reading: placement reads the live
    brokers from the registry (a cluster test created a topic of replication factor 3 right after
    its third broker started, and was refused "larger than the 2 available broker(s)")."""
    broker = inprocess_broker.broker
    registry = broker.metadata._registry
    held.held.set()
    for broker_id in (1, 2):  # each registration is announced: the refresh starts, and is held
        registry.register_broker(
            BrokerRegistration(broker_id=broker_id, host="127.0.0.1", port=9092 + broker_id)
        )
    assert held.reading.wait(WAIT_S), "no refresh started"
    assert len(broker.metadata.brokers()) == 1  # the cache has not seen them
    created = inprocess_broker.call(
        CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name="wide", num_partitions=2, replication_factor=3, assignments=[], configs=[]
                )
            ],
            timeout_ms=0,
            validate_only=True,
        )
    )
    assert [(t.name, t.error_code, t.error_message) for t in created.topics] == [("wide", 0, None)]
    held.held.clear()
    held.release.set()
    inprocess_broker._run(broker.refresher.idle(), WAIT_S)

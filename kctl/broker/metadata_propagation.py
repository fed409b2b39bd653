"""Metadata convergence for admin requests (issue 28): CreateTopics, CreatePartitions and DeleteTopics
are answered only once every live broker serves the new metadata.

Kafka's controller pushes UpdateMetadata to every broker before such a request is answered; kctl's
brokers learn from their ZooKeeper watches instead, each at its own pace, and a client that asks two
brokers in between would see two views (consumers rebalance on each difference). So the broker that
made the change asks every other live broker — registered, and not in a controlled shutdown — for
the changed topics' Metadata over the inter-broker channel (kctl.broker.replication.channel, the
inter-broker listener with its TLS/SASL), until each answers the new view:

- a created topic or added partitions: the topic is there and each new partition has a leader;
- a deleted topic: UNKNOWN_TOPIC_OR_PARTITION, or the name with another topic id (a client's
  Metadata request auto-created it again right after the deletion, as librdkafka's producers do:
  the deleted topic is gone all the same).

Its own cache is checked the same way. A broker that answered the new view is not asked again: a
broker's cache never goes back to an older view (kctl.broker.metadata_cache serializes its
refreshes). The probes start 5 ms apart and back off to 100 ms. Past the deadline (the request's
``timeout_ms``), the topics some broker still does not serve are answered REQUEST_TIMED_OUT, as
Kafka answers a topic whose partitions have no leader in time; the change itself stays made. A
broker that went away meanwhile (no longer registered) is not waited for; one whose channel fails or
does not answer is asked again until the deadline. A topic the inter-broker principal may not
describe (TOPIC_AUTHORIZATION_FAILED) cannot be checked and counts as served."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.replication.channel import BrokerChannel, ChannelError
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kctl.protocol.registry import ApiKey

log = logging.getLogger("kctl.broker")

#: what a change expects of a topic: the partitions that must have a leader, or the topic id of a
#: deleted topic (gone: no topic of that name, or one with another id)
Expectations = Mapping[str, frozenset[int] | uuid.UUID]

FIRST_INTERVAL_S = 0.005
MAX_INTERVAL_S = 0.1
METADATA_VERSION = 12


def served_locally(metadata: MetadataCache, topic: str, expected: frozenset[int] | uuid.UUID) -> bool:
    """Whether this broker's cache answers ``topic`` as ``expected`` (as the Metadata handler would:
    a leader counts only when it is a live broker)."""
    snapshot = metadata.snapshot
    record = snapshot.topics.get(topic)
    if isinstance(expected, uuid.UUID):
        return record is None or record.topic_id != expected
    if record is None:
        return False
    for partition in expected:
        state = snapshot.states.get((topic, partition))
        if partition not in record.assignment or state is None or state.leader not in snapshot.brokers:
            return False
    return True


def served_in(answer: Any, expected: frozenset[int] | uuid.UUID) -> bool:
    """Whether one topic of a Metadata response is the ``expected`` view."""
    if answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        return True  # cannot be checked (the inter-broker principal may not describe it)
    if isinstance(expected, uuid.UUID):
        if answer.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return True
        return bool(answer.error_code == ErrorCode.NONE and answer.topic_id != expected)
    if answer.error_code != ErrorCode.NONE:
        return False
    led = {p.partition_index for p in answer.partitions if p.leader_id >= 0}
    return expected <= led


class MetadataPropagation:
    """One broker's waits for the other brokers to serve its admin changes; keeps one inter-broker
    channel per broker between requests."""

    def __init__(
        self,
        broker_id: int,
        metadata: MetadataCache,
        channel_to: Callable[[int], BrokerChannel | None],
    ) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self._channel_to = channel_to
        self._channels: dict[int, BrokerChannel] = {}

    async def wait(self, expected: Expectations, deadline: float) -> dict[str, str]:
        """Wait until every live broker serves ``expected`` or the loop time ``deadline`` passes;
        returns, per topic still not served by some broker, a message naming those brokers."""
        if not expected:
            return {}
        loop = asyncio.get_running_loop()
        lagging: dict[int, set[str]] = {}  # broker -> topics it did not serve yet; all at first
        interval = FIRST_INTERVAL_S
        checked: set[int] = set()
        while True:
            live = self._other_live_brokers()
            for broker_id in live - checked:
                lagging[broker_id] = set(expected)
            checked |= live
            for broker_id in list(lagging):
                if broker_id != self.broker_id and broker_id not in live:
                    del lagging[broker_id]  # gone: not waited for
            local = {t for t, e in expected.items() if not served_locally(self.metadata, t, e)}
            if local:
                lagging[self.broker_id] = local
            else:
                lagging.pop(self.broker_id, None)
            remote = [b for b in lagging if b != self.broker_id]
            remaining = deadline - loop.time()
            if remote and remaining > 0:
                answers = await asyncio.gather(
                    *(self._lagging(b, {t: expected[t] for t in lagging[b]}, remaining) for b in remote)
                )
                for broker_id, still in zip(remote, answers, strict=True):
                    if still:
                        lagging[broker_id] = still
                    else:
                        del lagging[broker_id]
            if not lagging:
                return {}
            remaining = deadline - loop.time()
            if remaining <= 0:
                return self._late(lagging)
            await asyncio.sleep(min(interval, remaining))  # polling interval, bounded by the deadline
            interval = min(interval * 2, MAX_INTERVAL_S)

    def _other_live_brokers(self) -> set[int]:
        snapshot = self.metadata.snapshot
        return {b for b in snapshot.brokers if b != self.broker_id and b not in snapshot.shutting_down}

    async def _lagging(self, broker_id: int, expected: Expectations, timeout: float) -> set[str]:
        """The topics of ``expected`` that ``broker_id`` does not serve yet (all of them when it
        cannot be asked)."""
        channel = self._channel(broker_id)
        if channel is None:
            return set(expected)
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=topic) for topic in expected],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        try:
            async with asyncio.timeout(timeout):
                response = await channel.request(ApiKey.METADATA, METADATA_VERSION, request, timeout=timeout)
        except (ChannelError, TimeoutError) as error:
            log.debug("metadata probe of broker %d failed: %s", broker_id, error)
            # a connection cut short (even while connecting) is not reused
            self._channels.pop(broker_id, None)
            await channel.close()
            return set(expected)
        answers = {answer.name: answer for answer in response.topics}
        return {
            topic
            for topic, wanted in expected.items()
            if topic not in answers or not served_in(answers[topic], wanted)
        }

    def _channel(self, broker_id: int) -> BrokerChannel | None:
        fresh = self._channel_to(broker_id)  # the broker's current registration
        if fresh is None:
            return None
        channel = self._channels.get(broker_id)
        if channel is None:
            channel = self._channels[broker_id] = fresh
        else:
            channel.retarget(fresh.host, fresh.port)
        return channel

    def _late(self, lagging: dict[int, set[str]]) -> dict[str, str]:
        late: dict[str, list[int]] = {}
        for broker_id, topics in sorted(lagging.items()):
            for topic in topics:
                late.setdefault(topic, []).append(broker_id)
        log.warning(
            "admin request timed out before every broker served the new metadata of %s",
            ", ".join(f"{t} (not broker(s) {', '.join(map(str, b))})" for t, b in sorted(late.items())),
        )
        return {
            topic: f"the change is made, but broker(s) {', '.join(map(str, brokers))} do not serve it yet"
            for topic, brokers in late.items()
        }

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            with contextlib.suppress(Exception):
                await channel.close()

"""The counters request handling updates: per topic (records and bytes in and out, failures) and per
API (request count and time histograms). Plain integers and floats on ``__slots__`` objects, updated
on the event loop's thread once per partition of a request or once per request — never per record,
no lock, no label lookup: prometheus_client's own Counter and Histogram take a lock and look their
labels up on every update, which the collector (kctl.broker.metrics.collector) instead pays once per
scrape when it turns these into metric families."""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

from kctl.common.time_histogram import BUCKETS, TIME_BUCKETS_MS, TIME_BUCKETS_S, cumulative
from kctl.protocol.registry import ApiKey

__all__ = [
    "BUCKETS",
    "REQUEST_TIMES",
    "TIME_BUCKETS_MS",
    "TIME_BUCKETS_S",
    "TOPIC_COUNTERS",
    "BrokerStats",
    "RequestStats",
    "TopicStats",
    "cumulative",
    "kafka_api_name",
]

if TYPE_CHECKING:
    from kctl.broker.request_context import RequestContext

#: the request time histograms, in the order of RequestStats.counts and .sums
REQUEST_TIMES = ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems", "totaltimems")


def kafka_api_name(key: int) -> str:
    """Kafka's name of an API (``ApiKeys.name``): PRODUCE -> Produce, OFFSET_FOR_LEADER_EPOCH ->
    OffsetForLeaderEpoch."""
    try:
        name = ApiKey(key).name
    except ValueError:
        return f"Unknown{key}"
    return "".join(part.capitalize() for part in name.split("_"))


_LOCAL, _REMOTE, _SEND, _TOTAL = BUCKETS, 2 * BUCKETS, 3 * BUCKETS, 4 * BUCKETS


class RequestStats:
    """One API's (or FetchConsumer's, FetchFollower's) request count and its five time histograms
    (REQUEST_TIMES): ``counts`` holds their buckets one histogram after the other (BUCKETS each,
    not cumulative), ``sums`` their sums in seconds. The request count is the total-time
    histogram's (computed when read, not counted per request)."""

    __slots__ = ("counts", "sums")

    def __init__(self) -> None:
        self.counts = [0] * (BUCKETS * len(REQUEST_TIMES))
        self.sums = [0.0] * len(REQUEST_TIMES)

    @property
    def requests(self) -> int:
        return sum(self.counts[_TOTAL:])

    def histogram(self, index: int) -> tuple[list[int], float]:
        """The per-bucket counts and the sum (in ms) of the ``index``-th of REQUEST_TIMES."""
        return self.counts[index * BUCKETS : (index + 1) * BUCKETS], self.sums[index] * 1000

    def add(self, other: RequestStats) -> None:
        """Count ``other``'s requests in these (an API's histograms from its parts')."""
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.sums = [a + b for a, b in zip(self.sums, other.sums, strict=True)]


class TopicStats:
    """A topic's BrokerTopicMetrics counters (also kept once for all topics together)."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "bytes_rejected",
        "failed_fetch",
        "failed_produce",
        "messages_in",
        "messages_out",
        "total_fetch",
        "total_produce",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.messages_out = 0  # kctl's own: Kafka counts no records out
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.failed_produce = 0
        self.failed_fetch = 0
        self.total_produce = 0
        self.total_fetch = 0


#: TopicStats attribute -> the metric's name (Kafka's BrokerTopicMetrics, and kctl's records out)
TOPIC_COUNTERS: tuple[tuple[str, str], ...] = (
    *(
        (attribute, f"kafka_server_brokertopicmetrics_{short}_total")
        for attribute, short in (
            ("messages_in", "messagesin"),
            ("bytes_in", "bytesin"),
            ("bytes_out", "bytesout"),
            ("bytes_rejected", "bytesrejected"),
            ("failed_produce", "failedproducerequests"),
            ("failed_fetch", "failedfetchrequests"),
            ("total_produce", "totalproducerequests"),
            ("total_fetch", "totalfetchrequests"),
        )
    ),
    ("messages_out", "kctl_server_brokertopicmetrics_messagesout_total"),
)


class BrokerStats:
    """Everything counted on the request path. Handlers call the methods below (one call per
    partition of a request); the server calls ``observe_request`` once per request."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.all_topics = TopicStats()
        self.requests: dict[str, RequestStats] = {}
        self.by_key: dict[int, RequestStats] = {}  # the same, by api key
        self.parts: dict[str, str] = {}  # a second name (FetchConsumer) -> its API's (Fetch)
        self.replication_bytes_out = 0
        self.zookeeper_expires = 0  # ZooKeeper sessions expired / connections suspended (the broker's)
        self.zookeeper_disconnects = 0

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def forget_topic(self, name: str) -> None:
        """A deleted topic's counters go (as Kafka removes its BrokerTopicMetrics)."""
        self.topics.pop(name, None)

    def produced(self, topic: str, records: int, nbytes: int) -> None:
        """One partition's batches appended."""
        stats = self.topic(topic)
        every = self.all_topics
        stats.total_produce += 1
        stats.messages_in += records
        stats.bytes_in += nbytes
        every.total_produce += 1
        every.messages_in += records
        every.bytes_in += nbytes

    def produce_failed(self, topic: str, rejected_bytes: int, *, known: bool = True) -> None:
        """One partition of a produce failed; ``rejected_bytes`` when refused for its records. A topic
        not ``known`` to the cluster is counted in the all-topics series only (a client naming topics
        at random must not grow the broker's memory)."""
        stats = self.topic(topic) if known else TopicStats()
        every = self.all_topics
        stats.total_produce += 1
        stats.failed_produce += 1
        every.total_produce += 1
        every.failed_produce += 1
        if rejected_bytes:
            stats.bytes_rejected += rejected_bytes
            every.bytes_rejected += rejected_bytes

    def fetched(
        self,
        topic: str,
        partitions: int,
        failed: int,
        nbytes: int,
        *,
        follower: bool,
        known: bool = True,
        records: int = 0,
    ) -> None:
        """A fetch response's partitions of one topic: how many, how many failed, bytes of records,
        the records a consumer gets whole (a topic not ``known``: in the all-topics series only)."""
        stats = self.topic(topic) if known else TopicStats()
        every = self.all_topics
        stats.total_fetch += partitions
        every.total_fetch += partitions
        if failed:
            stats.failed_fetch += failed
            every.failed_fetch += failed
        if follower:
            self.replication_bytes_out += nbytes
        else:
            stats.bytes_out += nbytes
            every.bytes_out += nbytes
            stats.messages_out += records
            every.messages_out += records

    def observe_request(
        self,
        context: RequestContext,
        request_bytes: int,
        response_bytes: int,
        queue: float,
        local: float,
        remote: float,
        send: float,
        total: float,
    ) -> None:
        """The server's RequestObserver: one request's times (seconds) under its API's Kafka name, or
        under the second name its handler set (Fetch: FetchConsumer or FetchFollower) only: the API's
        histograms add its parts' up when read (``request_totals``), one update per request."""
        name = context.metric_name
        if name is None:
            key = context.header.api_key
            stats = self.by_key.get(key)
            if stats is None:
                stats = self.by_key[key] = self.request(kafka_api_name(key))
        else:
            stats = self.requests.get(name)
            if stats is None:
                stats = self.request(name)
                self.parts[name] = kafka_api_name(context.header.api_key)
        # RequestStats.observe, inlined: this runs once per request of every client
        bounds = TIME_BUCKETS_S
        counts = stats.counts
        counts[bisect_left(bounds, queue)] += 1
        counts[_LOCAL + bisect_left(bounds, local)] += 1
        counts[_REMOTE + bisect_left(bounds, remote) if remote else _REMOTE] += 1
        counts[_SEND + bisect_left(bounds, send)] += 1
        counts[_TOTAL + bisect_left(bounds, total)] += 1
        sums = stats.sums
        sums[0] += queue
        sums[1] += local
        sums[2] += remote
        sums[3] += send
        sums[4] += total

    def request(self, name: str) -> RequestStats:
        stats = self.requests.get(name)
        if stats is None:
            stats = self.requests[name] = RequestStats()
        return stats

    def request_totals(self) -> dict[str, RequestStats]:
        """Every request name's stats, an API's including its parts' (Fetch = the fetches observed
        as Fetch + FetchConsumer + FetchFollower), by name (for a scrape)."""
        totals = dict(self.requests)
        for part, api in list(self.parts.items()):
            combined = RequestStats()
            own = totals.get(api)
            if own is not None:
                combined.add(own)
            combined.add(self.requests[part])
            totals[api] = combined
        return dict(sorted(totals.items()))

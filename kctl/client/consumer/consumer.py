"""The consumer: assign partitions, position them, and read their records with pipelined long-poll
fetches.

::

    with Consumer("127.0.0.1:9092", {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        consumer.seek(TopicPartition("orders", 0), 1000)
        for record in consumer:                      # blocks until records arrive
            print(record.offset, record.key, record.value)

        records = consumer.poll(1.0)                 # or: what arrives within one second
        consumer.seek_to_end([TopicPartition("orders", 1)])
        ends = consumer.end_offsets(consumer.assignment())

Configuration uses Kafka's consumer property names (``ConsumerConfig``): ``fetch.min.bytes``,
``fetch.max.wait.ms``, ``fetch.max.bytes``, ``max.partition.fetch.bytes``, ``max.poll.records``,
``auto.offset.reset`` (earliest, latest or none), ``check.crcs``, ``isolation.level`` (sent:
read_committed reads up to the last stable offset and drops the records of aborted transactions, as
Kafka's consumer does: the Fetch response's aborted transactions and the ABORT markers) and every
``ClientConfig`` property (``client.id``, ``request.timeout.ms``, ...).

Fetching. One Fetch request per leader broker covers every assigned partition it leads that has a
position, is not paused, and has at most one fetched-but-unconsumed response buffered. While the
application works through the records of one response, the next request is already out (pipelined
prefetch: it is sent as soon as a response arrives, before its records are decoded — a response is
framed on arrival and its batches decoded one at a time as the application reaches them), so the
broker's reading and the network overlap with decoding and with the application. A poll that finds
nothing buffered sends a long poll: the broker holds it until ``fetch.min.bytes`` are there or
``fetch.max.wait.ms`` (at most the poll's timeout) has passed. A prefetch waits at most as long as the
previous poll allowed, so a poll returns within its timeout plus, when the timeout shrinks between
polls, the previous one's. Partitions are put in a different order in each full request, one that
came back with only a partial batch first, so each gets the broker's at-least-one-batch guarantee in
turn. Each broker is fetched from over a fetch session (KIP-227, ``sessions``): after the first full
Fetch, a Fetch names only the partitions whose fetch offset changed, and forgets those not fetched.

Fetching from the closest replica (KIP-392): Fetch v11+ carries ``client.rack``; a partition whose
leader answers with a preferred read replica is fetched from that broker until it answers an error
(then, after a backoff, from the leader again) or ``metadata.max.age.ms`` passes.

Errors while fetching: OFFSET_OUT_OF_RANGE resets the position per ``auto.offset.reset`` (``none``
raises ``OffsetOutOfRangeError`` from ``poll``); NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
lost connections and the other retriable errors mark the metadata stale and retry that partition
after a backoff (``retry.backoff.ms``, doubling to ``retry.backoff.max.ms``); a corrupt batch raises
``CorruptRecordError`` (and again on the next poll, until the application seeks past it).

Group membership plugs in without changing the fetch path (``kctl.client.group*`` provides it):
``_set_assignment(partitions, positions)`` replaces the assignment and positions (keeping the
positions and buffered records of partitions that stay), and a ``MembershipHooks`` object attached
with ``_attach_membership`` is called at every poll (heartbeats, rebalances, auto-commit), asked
for committed offsets when a partition has no position (before ``auto.offset.reset`` applies), and
told when the consumer closes. ``positions()`` gives what to commit.

This module is the ``Consumer`` and its fetch pipeline; the package's other modules hold its parts:
``positions`` (the assignment and each partition's position, reset, pause and backoff), ``sessions``
(the fetch sessions), ``offsets``
(the ListOffsets lookup), ``fetcher`` (Fetch requests, decoding, ``ConsumerRecord``) and ``config``
(``ConsumerConfig``).

Not thread-safe: use a consumer from one thread.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from kctl.client.cluster import ClusterClient
from kctl.client.config import ClientConfig
from kctl.client.connection import BrokerConnection, InFlightRequest
from kctl.client.consumer.config import ISOLATION_LEVELS, ConsumerConfig
from kctl.client.consumer.fetcher import (
    FETCH_MAX_VERSION,
    FETCH_MIN_VERSION,
    ConsumerRecord,
    CorruptRecordError,
    FetchedRecords,
    fetch,
    iter_partition_data,
)
from kctl.client.consumer.offsets import list_offsets
from kctl.client.consumer.positions import (
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    PartitionState,
    SubscriptionState,
)
from kctl.client.consumer.sessions import FetchSessions
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.offsets_spec import OffsetAndTimestamp
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.fetch_session_handler import FetchData

__all__ = ["MAX_BUFFERED_FETCHES", "Consumer", "MembershipHooks"]

MAX_BUFFERED_FETCHES = 2
"""Fetched responses kept per partition: the one being consumed and one prefetched."""

# partition errors after which a fetch is retried (after a metadata refresh and a backoff)
_RETRY_FETCH = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    }
)


# ----------------------------------------------------------------------------------------- hooks


class MembershipHooks(Protocol):
    """What group membership plugs into a ``Consumer`` (see the module docstring)."""

    def on_poll(self, consumer: Consumer) -> None:
        """At the start of every poll round: heartbeat, rebalance (``consumer._set_assignment``),
        auto-commit (``consumer.positions()``)."""

    def committed_offsets(self, partitions: Sequence[TopicPartition]) -> Mapping[TopicPartition, int]:
        """The committed offset of partitions that have no position (those without one are left to
        ``auto.offset.reset``)."""
        ...

    def on_close(self, consumer: Consumer) -> None:
        """When the consumer closes (final commit, leave the group)."""


# ----------------------------------------------------------------------------------------- fetched


class _Completed:
    """One partition's part of one fetch response: its batches are decoded one at a time as the
    application consumes them (``records`` is the current batch, consumed from ``index`` on);
    ``position`` is the offset of the next record it gives, ``next_offset`` the offset after it."""

    __slots__ = ("batch_end", "fetched", "index", "next_offset", "position", "records", "tp")

    def __init__(self, tp: TopicPartition, fetched: FetchedRecords, next_offset: int) -> None:
        self.tp = tp
        self.fetched = fetched
        self.position = fetched.fetch_offset
        self.next_offset = next_offset
        self.records: list[ConsumerRecord] = []
        self.index = 0
        self.batch_end = fetched.fetch_offset


@dataclasses.dataclass(slots=True)
class _PendingFetch:
    node: int
    conn: BrokerConnection
    request: InFlightRequest
    offsets: dict[TopicPartition, int]
    wait: float
    wanted: dict[TopicPartition, FetchData]
    epoch: int


# ----------------------------------------------------------------------------------------- consumer


class Consumer:
    """A Kafka consumer of assigned partitions. ``bootstrap_servers`` may be an existing
    ``ClusterClient`` (shared, then not closed by ``close``); ``config``: a ``ConsumerConfig``,
    Kafka consumer properties, or None; ``overrides``: ``ConsumerConfig`` field names."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | ClusterClient,
        config: ClientConfig | Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        if isinstance(bootstrap_servers, ClusterClient):
            base = config if config is not None else bootstrap_servers.config
            self.config = ConsumerConfig.coerce(base, **overrides)
            self._cluster = bootstrap_servers
            self._owns_cluster = False
        else:
            self.config = ConsumerConfig.coerce(config, **overrides)
            self._cluster = ClusterClient(bootstrap_servers, self.config)
            self._owns_cluster = True
        self._subscription = SubscriptionState(
            self.config.retry_backoff_ms / 1000.0, self.config.retry_backoff_max_ms / 1000.0
        )
        self._ready: collections.deque[_Completed] = collections.deque()
        self._buffered: dict[TopicPartition, int] = {}
        self._newest: dict[TopicPartition, _Completed] = {}
        self._pending: dict[int, _PendingFetch] = {}
        self._in_flight: set[TopicPartition] = set()
        self._sessions = FetchSessions()
        self._rotation = 0
        self._prefetch_wait_ms = self.config.fetch_max_wait_ms
        self._isolation = ISOLATION_LEVELS[self.config.isolation_level]
        self._membership: MembershipHooks | None = None
        self._closed = False

    # ------------------------------------------------------------------------------ life cycle

    @property
    def cluster(self) -> ClusterClient:
        """The cluster client (metadata, connections) this consumer uses."""
        return self._cluster

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._subscription.states)} partitions"
        return f"<Consumer {state}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop consuming: membership hooks run, fetched records are dropped, connections closed
        (those of a shared ``ClusterClient`` stay open, with no response left owing)."""
        if self._closed:
            return
        try:
            if self._membership is not None:
                self._membership.on_close(self)
        finally:
            self._closed = True
            self._close_sessions()
            if self._owns_cluster:
                self._cluster.close()
            else:
                for pending in self._pending.values():  # a shared connection must not keep our answers
                    with contextlib.suppress(KafkaError):
                        pending.conn.receive(pending.request, timeout=pending.wait + 1.0)
            self._pending.clear()
            self._in_flight.clear()
            self._ready.clear()
            self._buffered.clear()
            self._newest.clear()

    def _close_sessions(self) -> None:
        """Close the fetch sessions on their brokers (epoch -1), as Java's consumer does; best effort,
        after the fetches in flight are answered."""
        for node, pending in list(self._pending.items()):
            with contextlib.suppress(KafkaError):
                pending.conn.receive(pending.request, timeout=pending.wait + 1.0)
            del self._pending[node]
        for node, body in self._sessions.closing():
            with contextlib.suppress(KafkaError):
                conn = self._cluster.connection(node)
                version = conn.version_for(
                    ApiKey.FETCH, min_version=FETCH_MIN_VERSION, max_version=FETCH_MAX_VERSION
                )
                conn.request(ApiKey.FETCH, body, version, timeout=min(self.config.request_timeout, 5.0))

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError("the consumer is closed")

    # ------------------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions (replacing any earlier assignment). Partitions that stay
        keep their positions; new ones start per committed offsets or ``auto.offset.reset``."""
        self._check_open()
        self._set_assignment(partitions)

    def assignment(self) -> set[TopicPartition]:
        """The assigned partitions."""
        return set(self._subscription.states)

    def unassign(self) -> None:
        """Drop every partition."""
        self._set_assignment([])

    def _set_assignment(
        self, partitions: Iterable[TopicPartition], positions: Mapping[TopicPartition, int] | None = None
    ) -> None:
        """Replace the assignment (and, for those given, the positions): the hook group membership
        uses after a rebalance. Partitions that stay keep their positions and buffered records."""
        for tp in self._subscription.assign(partitions):
            self._purge(tp)
        for tp, offset in (positions or {}).items():
            self.seek(tp, offset)

    def _attach_membership(self, hooks: MembershipHooks | None) -> None:
        """Plug group membership in (None: take it out); see ``MembershipHooks``."""
        self._membership = hooks

    def _purge(self, tp: TopicPartition) -> None:
        """Forget the records fetched for ``tp`` (responses still in flight are ignored on arrival)."""
        if self._buffered.pop(tp, 0):
            self._ready = collections.deque(c for c in self._ready if c.tp != tp)
        self._newest.pop(tp, None)

    # ------------------------------------------------------------------------------ positions

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next offset to read from ``partition``."""
        self._purge(self._subscription.seek(partition, offset))

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Move to the log start offset of each partition (default: every assigned one)."""
        self._seek_to("earliest", partitions)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Move to the end offset (high watermark) of each partition (default: every assigned one)."""
        self._seek_to("latest", partitions)

    def _seek_to(self, which: str, partitions: Iterable[TopicPartition] | None) -> None:
        self._check_open()
        subscription = self._subscription
        tps = list(subscription.states) if partitions is None else [TopicPartition(*tp) for tp in partitions]
        for tp in tps:
            subscription.state(tp)
        for tp, offset in self._list_offsets(tps, which).items():
            self.seek(tp, offset)

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record ``poll`` returns for ``partition`` (looked up, per committed
        offsets or ``auto.offset.reset``, if it has none yet)."""
        self._check_open()
        state = self._subscription.state(partition)
        if state.position is None or state.reset is not None:
            self._resolve_positions(strict=True)
        assert state.position is not None
        return state.position

    def positions(self) -> dict[TopicPartition, int]:
        """The next offset of every assigned partition that has a position (what a group commits)."""
        return self._subscription.positions()

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark of ``partition`` in its last fetch response (None before one)."""
        return self._subscription.state(partition).high_watermark

    def _resolve_positions(self, *, strict: bool = False) -> None:
        """Give a position to every partition that lacks one: committed offsets (membership hooks),
        then the reset policy. ``strict``: raise the lookup's error instead of backing off."""
        subscription = self._subscription
        lacking = subscription.lacking()
        if not lacking:
            return
        if self._membership is not None:
            fresh = [tp for tp in lacking if subscription.states[tp].reset is None]
            if fresh:
                for tp, offset in self._membership.committed_offsets(fresh).items():
                    state = subscription.states.get(tp)
                    if state is not None and offset is not None and offset >= 0 and state.reset is None:
                        state.position = offset
                states = subscription.states
                lacking = [tp for tp in lacking if states[tp].position is None or states[tp].reset]
        by_strategy: dict[str, list[TopicPartition]] = {}
        out_of_range: dict[TopicPartition, int] = {}
        no_offset: list[TopicPartition] = []
        now = time.monotonic()
        for tp in lacking:
            state = subscription.states[tp]
            if not strict and state.retry_at > now:
                continue
            strategy = state.reset if state.reset in ("earliest", "latest") else self.config.auto_offset_reset
            if strategy == "none":
                if state.out_of_range is not None:
                    out_of_range[tp] = state.out_of_range
                else:
                    no_offset.append(tp)
                continue
            by_strategy.setdefault(strategy, []).append(tp)
        if out_of_range:
            raise OffsetOutOfRangeError(out_of_range)
        if no_offset:
            raise NoOffsetForPartitionError(no_offset)
        for strategy, tps in by_strategy.items():
            try:  # within a poll: one request's time, then back off rather than block the poll
                results = list_offsets(
                    self._cluster, tps, strategy, timeout=None if strict else self.config.request_timeout
                )
            except KafkaError as error:
                if strict or not error.retriable:
                    raise
                self._cluster.mark_stale()
                for tp in tps:
                    if tp in subscription.states:
                        subscription.back_off(subscription.states[tp], now)
                continue
            for tp, result in results.items():
                state = subscription.states.get(tp)
                if state is None:
                    continue
                if result.ok and result.offset >= 0:
                    state.position = result.offset
                    state.reset = None
                    state.out_of_range = None
                    state.backoff = 0.0
                    self._purge(tp)
                elif strict:
                    raise BrokerResponseError(
                        result.error_code, result.error_message, context=f"partition {tp}"
                    )
                else:
                    subscription.back_off(state, now)

    # ------------------------------------------------------------------------------ offsets

    def _list_offsets(self, partitions: list[TopicPartition], spec: str) -> dict[TopicPartition, int]:
        self._check_open()
        results = list_offsets(self._cluster, partitions, spec, isolation_level=self._isolation)
        offsets = {}
        for tp, result in results.items():
            if not result.ok:
                raise BrokerResponseError(result.error_code, result.error_message, context=f"partition {tp}")
            offsets[tp] = result.offset
        return offsets

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition (ListOffsets to the leaders)."""
        return self._list_offsets([TopicPartition(*tp) for tp in partitions], "earliest")

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The end offset of each partition: the high watermark (the offset the next record gets),
        for read_committed the last stable offset (as Kafka's consumer)."""
        return self._list_offsets([TopicPartition(*tp) for tp in partitions], "latest")

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose record's timestamp is at or after the given
        time (epoch ms) and that timestamp; None when no record is that recent."""
        self._check_open()
        specs = {TopicPartition(*tp): int(ts) for tp, ts in timestamps.items()}
        for tp, ts in specs.items():
            if ts < 0:
                raise ValueError(f"timestamp of {tp} must not be negative, got {ts}")
        results = list_offsets(self._cluster, specs)
        found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, result in results.items():
            if not result.ok:
                raise BrokerResponseError(result.error_code, result.error_message, context=f"partition {tp}")
            found[tp] = OffsetAndTimestamp(result.offset, result.timestamp) if result.offset >= 0 else None
        return found

    # ------------------------------------------------------------------------------ pause

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (their buffered records are kept, not returned)."""
        self._subscription.pause(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch these partitions again."""
        self._subscription.pause(partitions, paused=False)

    def paused(self) -> set[TopicPartition]:
        return self._subscription.paused()

    # ------------------------------------------------------------------------------ polling

    def poll(self, timeout: float | None = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """The next records of the assigned partitions, in offset order per partition: what is
        buffered, else what arrives within ``timeout`` seconds (None: wait until something does; 0:
        one round trip). At most ``max_records`` (default ``max.poll.records``)."""
        self._check_open()
        limit = max_records if max_records is not None else self.config.max_poll_records
        if limit < 1:
            raise ValueError("max_records must be at least 1")
        start = time.monotonic()
        deadline = float("inf") if timeout is None else start + max(timeout, 0.0)
        max_wait_ms = self.config.fetch_max_wait_ms
        self._prefetch_wait_ms = (
            max_wait_ms if timeout is None else min(max_wait_ms, int(max(timeout, 0.0) * 1000))
        )
        first = True
        while True:
            if self._membership is not None:
                self._membership.on_poll(self)
            self._resolve_positions()
            records = self._drain(limit)
            if records:
                self._send_fetches(self._prefetch_wait_ms)  # pipelined: the next one is on its way
                return records
            now = time.monotonic()
            if now >= deadline and not first:
                return []
            first = False
            if not self._pending:
                remaining_ms = max_wait_ms if timeout is None else int(max(deadline - now, 0.0) * 1000)
                self._send_fetches(min(max_wait_ms, remaining_ms))
            if self._pending:
                self._receive()
                if self._ready:  # framed, not decoded yet: ask for what follows before decoding
                    self._send_fetches(self._prefetch_wait_ms)
            else:  # nothing to fetch: no assignment, all paused, or backing off
                if now >= deadline:
                    return []
                retry_at = self._subscription.next_retry(now, now + self.config.fetch_max_wait)
                pause = min(deadline - now, retry_at - now, max_wait_ms / 1000.0)
                time.sleep(max(pause, 0.001))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self.stream()

    def stream(
        self, *, stop: Callable[[], bool] | None = None, idle_timeout: float | None = None
    ) -> Iterator[ConsumerRecord]:
        """Yield records as they arrive, blocking while there are none. Ends when ``stop()`` returns
        true (checked before each poll, i.e. between batches of records), after ``idle_timeout``
        seconds without a record, or when the consumer is closed."""
        idle_since = time.monotonic()
        wait = max(self.config.fetch_max_wait, 0.05)
        while not self._closed:
            if stop is not None and stop():
                return
            timeout = wait
            if idle_timeout is not None:
                timeout = min(wait, max(idle_since + idle_timeout - time.monotonic(), 0.0))
            records = self.poll(timeout)
            if records:
                yield from records
                idle_since = time.monotonic()
            elif idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                return

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576
    ) -> list[ConsumerRecord]:
        """The seeds' stateless simple-consumer call: one Fetch of ``topic``/``partition`` from
        ``offset`` (up to ``max_bytes``); touches no assignment or position. See ``fetcher.fetch``."""
        self._check_open()
        return fetch(self._cluster, topic, partition, offset, max_bytes, check_crcs=self.config.check_crcs)

    # ------------------------------------------------------------------------------ internals

    def _drain(self, limit: int) -> list[ConsumerRecord]:
        """Take up to ``limit`` records from the buffered responses (decoding their batches as they
        are reached), advancing positions. A corrupt batch raises CorruptRecordError, unless records
        were taken already: then they are returned, and the next fetch meets the batch again."""
        ready = self._ready
        if not ready:
            return []
        out: list[ConsumerRecord] = []
        states = self._subscription.states
        i = 0
        while i < len(ready) and len(out) < limit:
            completed = ready[i]
            tp = completed.tp
            state = states.get(tp)
            if state is None or state.position != completed.position:
                self._purge(tp)  # unassigned or seeked since it was fetched: this and what follows
                ready = self._ready  # (entries before i belong to paused partitions, not to tp)
                continue
            if state.paused:
                i += 1
                continue
            while len(out) < limit:
                records = completed.records
                index = completed.index
                if index < len(records):
                    take = limit - len(out)
                    if index == 0 and len(records) <= take:
                        out += records
                        index = len(records)
                    else:
                        chunk = records[index : index + take]
                        out += chunk
                        index += len(chunk)
                    completed.index = index
                    position = completed.batch_end if index >= len(records) else records[index - 1].offset + 1
                    completed.position = state.position = position
                    continue
                try:
                    batch = completed.fetched.next_batch()
                except CorruptRecordError:
                    self._purge(tp)  # the position stays at the corrupt batch
                    if out:
                        return out
                    raise
                if batch is None:  # every batch consumed
                    completed.position = state.position = completed.next_offset
                    self._drop(i, completed)
                    break
                completed.records = batch[0]
                completed.index = 0
                completed.batch_end = batch[1]
                if not batch[0]:  # a control batch, or records below the fetch offset only
                    completed.position = state.position = batch[1]
        return out

    def _drop(self, i: int, completed: _Completed) -> None:
        del self._ready[i]
        tp = completed.tp
        left = self._buffered.get(tp, 0) - 1
        if left > 0:
            self._buffered[tp] = left
        else:
            self._buffered.pop(tp, None)
        if self._newest.get(tp) is completed:
            del self._newest[tp]

    def _fetch_position(self, tp: TopicPartition, state: PartitionState) -> int | None:
        """Where the next fetch of ``tp`` starts: after the newest buffered response, else the position."""
        newest = self._newest.get(tp)
        return newest.next_offset if newest is not None else state.position

    def _send_fetches(self, max_wait_ms: int) -> None:
        """Send one Fetch to each leader that leads a fetchable partition and has none in flight."""
        subscription = self._subscription
        order = subscription.order
        if not order:
            return
        states = subscription.states
        now = time.monotonic()
        shift = self._rotation % len(order)
        self._rotation += 1
        rotated = order[shift:] + order[:shift]
        rotated.sort(key=lambda tp: not states[tp].partial)  # stable: partial-batch partitions first
        by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp in rotated:
            state = states[tp]
            if state.paused or state.reset is not None or state.position is None or tp in self._in_flight:
                continue
            if state.retry_at > now or self._buffered.get(tp, 0) >= MAX_BUFFERED_FETCHES:
                continue
            try:
                node = state.read_replica(self._cluster.leader_for(tp), now)
            except KafkaError:
                self._cluster.mark_stale()
                subscription.back_off(state, now)
                continue
            if node in self._pending:
                continue
            offset = self._fetch_position(tp, state)
            assert offset is not None
            by_node.setdefault(node, []).append((tp, offset))
        config = self.config
        for node, parts in by_node.items():
            try:
                conn = self._cluster.connection(node)
                version = conn.version_for(
                    ApiKey.FETCH, min_version=FETCH_MIN_VERSION, max_version=FETCH_MAX_VERSION
                )
                body, wanted, epoch = self._sessions.request(
                    node,
                    version,
                    parts,
                    max_wait_ms=max_wait_ms,
                    min_bytes=config.fetch_min_bytes,
                    max_bytes=config.fetch_max_bytes,
                    partition_max_bytes=config.max_partition_fetch_bytes,
                    isolation_level=self._isolation,
                    rack_id=config.client_rack or "",
                )
                request = conn.send(ApiKey.FETCH, body, version)
            except KafkaError as error:
                if not error.retriable:
                    raise
                self._sessions.failed(node)
                self._cluster.mark_stale()
                for tp, _ in parts:
                    subscription.back_off(states[tp], now)
                continue
            offsets, wait = dict(parts), max_wait_ms / 1000.0
            self._pending[node] = _PendingFetch(node, conn, request, offsets, wait, wanted, epoch)
            self._in_flight.update(offsets)

    def _receive(self) -> None:
        """Read the responses in flight, until one brings records (the others stay in flight)."""
        first_error: KafkaError | None = None
        for node in list(self._pending):
            pending = self._pending.pop(node)
            self._in_flight.difference_update(pending.offsets)
            try:
                response = pending.conn.receive(
                    pending.request, timeout=self.config.request_timeout + pending.wait
                )
            except KafkaError as error:
                if not error.retriable:
                    raise
                self._sessions.failed(node)
                self._cluster.mark_stale()
                now = time.monotonic()
                subscription = self._subscription
                for tp in pending.offsets:
                    state = subscription.states.get(tp)
                    if state is not None:
                        subscription.back_off(state, now)
                continue
            if not self._sessions.response(node, pending.wanted, pending.epoch, response):
                continue  # a session error: nothing else in the response, the next fetch is a full one
            try:
                self._handle_response(pending, response)
            except KafkaError as error:
                first_error = first_error or error
            if self._ready:
                break
        if first_error is not None:
            raise first_error

    def _handle_response(self, pending: _PendingFetch, response: Any) -> None:
        now = time.monotonic()
        subscription = self._subscription
        states = subscription.states
        offsets = pending.offsets
        top_error = getattr(response, "error_code", 0)
        if top_error:
            self._cluster.mark_stale()
            for tp in offsets:
                state = states.get(tp)
                if state is not None:
                    subscription.back_off(state, now)
            if top_error in _RETRY_FETCH:
                return
            raise BrokerResponseError(top_error, context="fetch")
        config = self.config
        error: KafkaError | None = None
        for tp, part in iter_partition_data(response):
            fetch_offset = offsets.get(tp)
            state = states.get(tp)
            if fetch_offset is None or state is None or self._fetch_position(tp, state) != fetch_offset:
                continue  # not asked, no longer assigned, or seeked since
            code = part.error_code
            if code == 0 and part.preferred_read_replica >= 0:  # KIP-392: fetch from that replica
                state.preferred_replica = part.preferred_read_replica
                state.preferred_until = now + config.metadata_max_age_ms / 1000.0
            elif code == 0:
                state.high_watermark = part.high_watermark
                state.last_stable_offset = part.last_stable_offset
                state.log_start_offset = part.log_start_offset
                state.backoff = 0.0
                fetched = FetchedRecords(
                    tp.topic,
                    tp.partition,
                    part.records,
                    fetch_offset,
                    check_crcs=config.check_crcs,
                    aborted_transactions=part.aborted_transactions if self._isolation else None,
                )
                state.partial = fetched.partial
                if fetched.next_offset is None:
                    if fetched.broken is not None:  # nothing readable: the error is the answer
                        try:
                            fetched.next_batch()
                        except CorruptRecordError as corrupt:
                            error = error or corrupt
                    continue
                completed = _Completed(tp, fetched, fetched.next_offset)
                self._ready.append(completed)
                self._buffered[tp] = self._buffered.get(tp, 0) + 1
                self._newest[tp] = completed
            elif state.preferred_replica == pending.node:  # the replica failed: back to the leader
                subscription.back_off(state, now)
            elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                state.reset = "auto"
                state.out_of_range = fetch_offset
                self._purge(tp)
            elif code in _RETRY_FETCH:
                self._cluster.mark_stale()
                subscription.back_off(state, now)
            else:
                subscription.back_off(state, now)
                error = error or BrokerResponseError(code, context=f"fetch {tp} at offset {fetch_offset}")
        if error is not None:
            raise error

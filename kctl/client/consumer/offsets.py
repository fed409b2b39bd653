"""The ListOffsets lookup: the earliest (log start), latest (high watermark), max-timestamp or
first-at-a-time offset of partitions, asked of each partition's leader over a ``ClusterClient``.

::

    results = list_offsets(cluster, [TopicPartition("orders", 0)], "earliest")
    results = list_offsets(cluster, {TopicPartition("orders", 0): 1_700_000_000_000})  # per partition
    results[TopicPartition("orders", 0)].offset

The consumer positions its partitions with it (``seek_to_beginning``, ``end_offsets``,
``offsets_for_times``, ``auto.offset.reset``); it needs nothing but a ``ClusterClient``, so the admin
client can answer its own ``list_offsets`` with it too. One request per leader, all sent before any
answer is read; partitions that fail with a retriable error (a leader that moved, a lost connection,
...) are asked again after a backoff (``retry.backoff.ms``, doubling to ``retry.backoff.max.ms``) with
fresh metadata, until the deadline; the result of each partition is its offset or its last error.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kctl.client.cluster import RETRIABLE_CODES, ClusterClient, Deadline, is_retriable
from kctl.client.errors import (
    BrokerResponseError,
    IncompatibleBrokerError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kctl.client.types import TopicPartition
from kctl.protocol import ApiKey, ErrorCode, error_name
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "OFFSET_SPECS",
    "ListOffsetsSpec",
    "OffsetResult",
    "list_offsets",
    "offset_timestamp",
]

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
OFFSET_SPECS: dict[str, int] = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}
"""The named ``list_offsets`` specs and the timestamps Kafka's ListOffsets uses for them."""

ListOffsetsSpec = str | int
"""``"earliest"``, ``"latest"``, ``"max-timestamp"`` or a timestamp in ms (first offset at or after it)."""

_Outcome = tuple[int, str | None, tuple[int, int, int] | None]
"""(error code, error message, (offset, timestamp, leader epoch)) of one partition."""


@dataclasses.dataclass(frozen=True)
class OffsetResult:
    """ListOffsets for one partition: ``offset`` (-1 when none), the record's ``timestamp`` (-1 when
    not applicable), the leader epoch; or an error."""

    topic_partition: TopicPartition
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error_code: int = 0
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code == 0

    @property
    def error(self) -> str | None:
        """Kafka's name of the error (``NOT_LEADER_OR_FOLLOWER``), None when it succeeded."""
        return error_name(self.error_code) if self.error_code else None


def offset_timestamp(spec: ListOffsetsSpec) -> int:
    """The timestamp ListOffsets asks for ``spec``: -2 (earliest), -1 (latest), -3 (max-timestamp),
    or a timestamp in ms. Raises ``ValueError`` for anything else."""
    if isinstance(spec, bool):
        raise ValueError(f"bad offset spec {spec!r}")
    if isinstance(spec, int):
        if spec < 0 and spec not in (EARLIEST, LATEST, MAX_TIMESTAMP):
            raise ValueError(f"bad offset spec {spec}: a timestamp in ms, or earliest/latest/max-timestamp")
        return spec
    text = str(spec).strip().lower()
    if text in OFFSET_SPECS:
        return OFFSET_SPECS[text]
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"bad offset spec {spec!r}: expected earliest, latest, max-timestamp or a timestamp in ms"
        ) from None
    return offset_timestamp(value)


def list_offsets(
    cluster: ClusterClient,
    topic_partitions: Iterable[TopicPartition] | Mapping[TopicPartition, ListOffsetsSpec],
    spec: ListOffsetsSpec = "latest",
    *,
    isolation_level: int = 0,
    timeout: float | None = None,
) -> dict[TopicPartition, OffsetResult]:
    """Offsets of partitions (ListOffsets, to each leader): ``spec`` is ``"earliest"`` (the log
    start offset), ``"latest"`` (the high watermark), ``"max-timestamp"`` (the record with the
    largest timestamp) or a timestamp in ms (the first offset at or after it; -1 if none).
    A mapping gives each partition its own spec. ``isolation_level`` 1 is READ_COMMITTED.
    ``timeout``: seconds for the whole lookup, retries included (default ``default.api.timeout.ms``).
    Raises only for errors that are not retriable, or a retriable one that failed every partition
    up to the deadline; the partitions' own errors are in their results."""
    if isinstance(topic_partitions, Mapping):
        specs = {TopicPartition(*tp): offset_timestamp(s) for tp, s in topic_partitions.items()}
    else:
        timestamp = offset_timestamp(spec)
        specs = {TopicPartition(*tp): timestamp for tp in topic_partitions}
    if not specs:
        return {}
    lookup = _Lookup(cluster, specs, isolation_level, cluster.deadline(timeout))
    outcomes = lookup.run()
    results = {}
    for tp in specs:
        code, message, payload = outcomes[tp]
        if code or payload is None:
            results[tp] = OffsetResult(tp, error_code=code, error_message=message)
        else:
            offset, ts, epoch = payload
            results[tp] = OffsetResult(tp, offset, ts, epoch)
    return results


def _error_code_of(error: KafkaError) -> int:
    if isinstance(error, BrokerResponseError):
        return error.code
    if isinstance(error, KafkaTimeoutError):
        return ErrorCode.REQUEST_TIMED_OUT
    if isinstance(error, KafkaConnectionError):
        return ErrorCode.NETWORK_EXCEPTION
    if isinstance(error, IncompatibleBrokerError):
        return ErrorCode.UNSUPPORTED_VERSION
    return ErrorCode.UNKNOWN_SERVER_ERROR


class _Lookup:
    """One ``list_offsets`` call: attempts over the partitions still pending, until each has its
    offset or an error that is not retriable, or the deadline passes."""

    def __init__(
        self,
        cluster: ClusterClient,
        specs: dict[TopicPartition, int],
        isolation_level: int,
        deadline: Deadline,
    ) -> None:
        self.cluster = cluster
        self.specs = specs
        self.isolation_level = isolation_level
        self.deadline = deadline
        self.min_version = 7 if MAX_TIMESTAMP in specs.values() else (2 if isolation_level else None)

    def run(self) -> dict[TopicPartition, _Outcome]:
        config = self.cluster.config
        final: dict[TopicPartition, _Outcome] = {}
        pending = list(self.specs)
        backoff = config.retry_backoff_ms / 1000.0
        while pending:
            raised: KafkaError | None = None
            try:
                outcomes = self.attempt(pending)
            except KafkaError as error:
                if not is_retriable(error):
                    raise
                raised = error
                outcomes = {tp: (_error_code_of(error), str(error), None) for tp in pending}
            retry: list[TopicPartition] = []
            for tp in pending:
                outcome = outcomes.get(
                    tp, (ErrorCode.UNKNOWN_SERVER_ERROR, "the broker's response did not mention it", None)
                )
                if outcome[0] and outcome[0] in RETRIABLE_CODES:
                    retry.append(tp)
                final[tp] = outcome
            if not retry:
                break
            wait = backoff * random.uniform(0.8, 1.2)
            if self.deadline.remaining() <= wait:
                if raised is not None and len(retry) == len(pending):
                    raise raised
                break
            self.cluster.mark_stale()
            time.sleep(wait)
            backoff = min(backoff * 2, config.retry_backoff_max_ms / 1000.0)
            pending = retry
        return final

    def attempt(self, pending: list[TopicPartition]) -> dict[TopicPartition, _Outcome]:
        """One request per leader of the pending partitions (all sent, then all received)."""
        cluster, deadline = self.cluster, self.deadline
        outcomes: dict[TopicPartition, _Outcome] = {}
        groups: dict[int, dict[TopicPartition, int]] = {}
        for tp in pending:
            try:
                leader = cluster.leader_for(tp, deadline=deadline)
            except BrokerResponseError as error:
                outcomes[tp] = (error.code, error.message, None)
                continue
            groups.setdefault(leader, {})[tp] = self.specs[tp]
        sent = []
        for leader, group in groups.items():
            try:
                conn = cluster.connection(leader, deadline=deadline)
                version = conn.version_for(ApiKey.LIST_OFFSETS, min_version=self.min_version)
                sent.append((conn, conn.send(ApiKey.LIST_OFFSETS, self.request(group), version), group))
            except KafkaError as error:
                if not error.retriable and not isinstance(error, IncompatibleBrokerError):
                    raise
                outcomes.update({tp: (_error_code_of(error), str(error), None) for tp in group})
        for conn, in_flight, group in sent:
            try:
                response = conn.receive(in_flight, timeout=deadline.timeout(cluster.config.request_timeout))
            except KafkaError as error:
                if not error.retriable:
                    raise
                outcomes.update({tp: (_error_code_of(error), str(error), None) for tp in group})
                continue
            parsed = self.parse(response)
            for tp in group:
                outcomes[tp] = parsed.get(
                    tp, (ErrorCode.UNKNOWN_SERVER_ERROR, "the leader's response did not mention it", None)
                )
        return outcomes

    def request(self, group: dict[TopicPartition, int]) -> ListOffsetsRequest:
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for tp, ts in group.items():
            by_topic.setdefault(tp.topic, []).append(
                ListOffsetsPartition(partition_index=tp.partition, timestamp=ts, max_num_offsets=1)
            )
        return ListOffsetsRequest(
            replica_id=-1,
            isolation_level=self.isolation_level,
            topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

    @staticmethod
    def parse(response: Any) -> dict[TopicPartition, _Outcome]:
        out: dict[TopicPartition, _Outcome] = {}
        for t in response.topics:
            for p in t.partitions:
                offset, ts = p.offset, p.timestamp
                if p.old_style_offsets:  # v0
                    offset, ts = p.old_style_offsets[0], -1
                tp = TopicPartition(t.name, p.partition_index)
                out[tp] = (p.error_code, None, (offset, ts, p.leader_epoch))
        return out

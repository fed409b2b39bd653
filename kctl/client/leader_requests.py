"""The retry engine the admin client and the consumer's offset lookup share: ``retry_pending`` runs an
attempt over the items still pending (topics, resources, partitions), retrying those that failed
retriably with backoff (``retry.backoff.ms``, doubling to ``retry.backoff.max.ms``) and fresh
metadata until the deadline; ``per_leader`` is such an attempt that sends one pipelined request per
partition leader (all sent, then all received). Each item ends with an ``Outcome``: its error code
(0: success), the broker's message, and what the response said of it.

With ``ClusterClient.give_up_after`` (admin clients), an item waiting on a broker given up — its
leader's connection refused or its requests unanswered that long — ends with that failure
(``Outcome.final``) instead of being retried to the deadline, and so does a partition without a
leader whose replicas are all gone or given up (``ClusterClient.offline``): nothing is left to
elect."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from kctl.client.cluster import RETRIABLE_CODES, ClusterClient, Deadline, is_retriable
from kctl.client.errors import (
    BrokerNotAnsweringError,
    BrokerResponseError,
    IncompatibleBrokerError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ErrorCode

__all__ = ["Outcome", "error_code_of", "per_leader", "retry_pending"]

K = TypeVar("K")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The outcome of one item of an operation: its error code (0: success), the broker's message,
    and what the response said of it (``payload``, for the operation to read); ``final``: not to be
    retried whatever the code (the broker it waits on was given up)."""

    error_code: int
    error_message: str | None = None
    payload: Any = None
    final: bool = False


def error_code_of(error: KafkaError) -> int:
    """The Kafka error code that stands for a client-side ``error`` in an item's outcome."""
    if isinstance(error, BrokerResponseError):
        return error.code
    if isinstance(error, KafkaTimeoutError):
        return ErrorCode.REQUEST_TIMED_OUT
    if isinstance(error, KafkaConnectionError):
        return ErrorCode.NETWORK_EXCEPTION
    if isinstance(error, IncompatibleBrokerError):
        return ErrorCode.UNSUPPORTED_VERSION
    return ErrorCode.UNKNOWN_SERVER_ERROR


def retry_pending(
    cluster: ClusterClient,
    keys: Sequence[K],
    attempt: Callable[[list[K], Deadline], dict[K, Outcome]],
    deadline: Deadline,
    retry_codes: Collection[int] = (),
) -> dict[K, Outcome]:
    """Run ``attempt`` on the pending keys until each has a final outcome (success, or an error
    not retriable), retrying the rest with backoff until the deadline. An exception from
    ``attempt`` concerns every pending key: retried if retriable, re-raised at the deadline."""
    config = cluster.config
    final: dict[K, Outcome] = {}
    pending = list(dict.fromkeys(keys))
    backoff = config.retry_backoff_ms / 1000.0
    while pending:
        raised: KafkaError | None = None
        try:
            outcomes = attempt(pending, deadline)
        except KafkaError as error:
            if not is_retriable(error, retry_codes):
                raise
            raised = error
            outcomes = {k: Outcome(error_code_of(error), str(error)) for k in pending}
        retry: list[K] = []
        for key in pending:
            outcome = outcomes.get(
                key, Outcome(ErrorCode.UNKNOWN_SERVER_ERROR, "the broker's response did not mention it")
            )
            code = outcome.error_code
            if code and not outcome.final and (code in RETRIABLE_CODES or code in retry_codes):
                retry.append(key)
            final[key] = outcome
        if not retry:
            break
        wait = backoff * random.uniform(0.8, 1.2)
        if deadline.remaining() <= wait:
            if raised is not None and len(retry) == len(pending):
                raise raised
            break
        cluster.mark_stale()
        time.sleep(wait)
        backoff = min(backoff * 2, config.retry_backoff_max_ms / 1000.0)
        pending = retry
    return final


def per_leader(
    cluster: ClusterClient,
    items: Mapping[TopicPartition, Any],
    api_key: int,
    build: Callable[[dict[TopicPartition, Any], int, Deadline], Any],
    parse: Callable[[Any], dict[TopicPartition, Outcome]],
    deadline: Deadline,
    *,
    min_version: int | None = None,
    retry_codes: Collection[int] = (),
) -> dict[TopicPartition, Outcome]:
    """``retry_pending`` over partitions, each attempt sending one request per partition leader
    (pipelined: all sent, then all received). ``build(group, version, deadline)`` makes a leader's
    request for its partitions' items; ``parse(response)`` gives the outcome of each partition."""

    def attempt(pending: list[TopicPartition], deadline: Deadline) -> dict[TopicPartition, Outcome]:
        outcomes: dict[TopicPartition, Outcome] = {}
        groups: dict[int, dict[TopicPartition, Any]] = {}
        for tp in pending:
            try:
                leader = cluster.leader_for(tp, deadline=deadline)
            except BrokerResponseError as error:
                if cluster.offline(tp):
                    message = f"partition {tp} has no leader and no replica that could become one"
                    outcomes[tp] = Outcome(error.code, message, final=True)
                else:
                    outcomes[tp] = Outcome(error.code, error.message)
                continue
            groups.setdefault(leader, {})[tp] = items[tp]
        sent = []
        for leader, group in groups.items():
            try:
                conn = cluster.connection(leader, deadline=deadline)
                version = conn.version_for(api_key, min_version=min_version)
                started = time.monotonic()
                in_flight = conn.send(api_key, build(group, version, deadline), version)
                sent.append((conn, in_flight, group, started))
            except KafkaError as error:
                final = isinstance(error, BrokerNotAnsweringError)
                if not error.retriable and not final and not isinstance(error, IncompatibleBrokerError):
                    raise
                outcomes.update({tp: Outcome(error_code_of(error), str(error), final=final) for tp in group})
        for conn, in_flight, group, started in sent:
            try:
                response = conn.receive(in_flight, timeout=deadline.timeout(cluster.config.request_timeout))
            except KafkaError as error:
                if not error.retriable:
                    raise
                final = False
                if conn.node_id is not None:
                    cluster.broker_failed(conn.node_id, error, started=started)
                    final = cluster.given_up(conn.node_id)
                outcomes.update({tp: Outcome(error_code_of(error), str(error), final=final) for tp in group})
                continue
            parsed = parse(response)
            for tp in group:
                outcomes[tp] = parsed.get(tp) or Outcome(
                    ErrorCode.UNKNOWN_SERVER_ERROR, "the leader's response did not mention it"
                )
        return outcomes

    return retry_pending(cluster, list(items), attempt, deadline, retry_codes)

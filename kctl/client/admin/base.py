"""The admin client's plumbing, which its operations share: the cluster connection it owns (or
borrows), deadlines, and the retry engine — ``_run`` retries the items of an operation that failed
retriably, with backoff, until the deadline; ``_per_leader`` sends one pipelined request per
partition leader."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Self

from kctl.client.cluster import RETRIABLE_CODES, ClusterClient, Deadline, is_retriable
from kctl.client.config import ClientConfig
from kctl.client.errors import (
    BrokerResponseError,
    IncompatibleBrokerError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kctl.client.types import TopicPartition
from kctl.protocol import ErrorCode


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The outcome of one item of an operation: its error code (0: success), the broker's message,
    and what the response said of it (``payload``, for the operation to read)."""

    error_code: int
    error_message: str | None = None
    payload: Any = None


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



class AdminBase:
    """The connection and retry engine of an admin client. ``bootstrap_servers`` may also be an
    existing ``ClusterClient`` (shared, then not closed by ``close``). ``config``/``overrides`` as
    for ``ClusterClient``."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | ClusterClient,
        config: ClientConfig | Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        if isinstance(bootstrap_servers, ClusterClient):
            self.cluster = bootstrap_servers
            self._owns_cluster = False
        else:
            self.cluster = ClusterClient(bootstrap_servers, config, **overrides)
            self._owns_cluster = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_cluster:
            self.cluster.close()

    @property
    def config(self) -> ClientConfig:
        return self.cluster.config

    def _deadline(self, timeout: float | None) -> Deadline:
        return self.cluster.deadline(timeout)

    def _request_timeout_ms(self, deadline: Deadline) -> int:
        """The server-side timeout to put in a request: what is left, within ``request.timeout.ms``."""
        return max(int(deadline.timeout(self.config.request_timeout) * 1000), 1)

    # ------------------------------------------------------------------------------ retry engine

    def _run(
        self,
        keys: Sequence[Any],
        attempt: Callable[[list[Any], Deadline], dict[Any, Outcome]],
        deadline: Deadline,
        retry_codes: Collection[int] = (),
    ) -> dict[Any, Outcome]:
        """Run ``attempt`` on the pending keys until each has a final outcome (success, or an error
        not retriable), retrying the rest with backoff until the deadline. An exception from
        ``attempt`` concerns every pending key: retried if retriable, re-raised at the deadline."""
        final: dict[Any, Outcome] = {}
        pending = list(dict.fromkeys(keys))
        backoff = self.config.retry_backoff_ms / 1000.0
        while pending:
            raised: KafkaError | None = None
            try:
                outcomes = attempt(pending, deadline)
            except KafkaError as error:
                if not is_retriable(error, retry_codes):
                    raise
                raised = error
                outcomes = {k: Outcome(_error_code_of(error), str(error)) for k in pending}
            retry: list[Any] = []
            for key in pending:
                outcome = outcomes.get(
                    key, Outcome(ErrorCode.UNKNOWN_SERVER_ERROR, "the broker's response did not mention it")
                )
                code = outcome.error_code
                if code and (code in RETRIABLE_CODES or code in retry_codes):
                    retry.append(key)
                final[key] = outcome
            if not retry:
                break
            wait = backoff * random.uniform(0.8, 1.2)
            if deadline.remaining() <= wait:
                if raised is not None and len(retry) == len(pending):
                    raise raised
                break
            self.cluster.mark_stale()
            time.sleep(wait)
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000.0)
            pending = retry
        return final

    def _per_leader(
        self,
        items: Mapping[TopicPartition, Any],
        api_key: int,
        build: Callable[[dict[TopicPartition, Any], int, Deadline], Any],
        parse: Callable[[Any], dict[TopicPartition, Outcome]],
        deadline: Deadline,
        *,
        min_version: int | None = None,
        retry_codes: Collection[int] = (),
    ) -> dict[TopicPartition, Outcome]:
        """Send one request per partition leader (pipelined: all sent, then all received)."""

        def attempt(pending: list[TopicPartition], deadline: Deadline) -> dict[TopicPartition, Outcome]:
            outcomes: dict[TopicPartition, Outcome] = {}
            groups: dict[int, dict[TopicPartition, Any]] = {}
            for tp in pending:
                try:
                    leader = self.cluster.leader_for(tp, deadline=deadline)
                except BrokerResponseError as error:
                    outcomes[tp] = Outcome(error.code, error.message)
                    continue
                groups.setdefault(leader, {})[tp] = items[tp]
            sent = []
            for leader, group in groups.items():
                try:
                    conn = self.cluster.connection(leader, deadline=deadline)
                    version = conn.version_for(api_key, min_version=min_version)
                    sent.append((conn, conn.send(api_key, build(group, version, deadline), version), group))
                except KafkaError as error:
                    if not error.retriable and not isinstance(error, IncompatibleBrokerError):
                        raise
                    outcomes.update({tp: Outcome(_error_code_of(error), str(error)) for tp in group})
            for conn, in_flight, group in sent:
                try:
                    response = conn.receive(in_flight, timeout=deadline.timeout(self.config.request_timeout))
                except KafkaError as error:
                    if not error.retriable:
                        raise
                    outcomes.update({tp: Outcome(_error_code_of(error), str(error)) for tp in group})
                    continue
                parsed = parse(response)
                for tp in group:
                    outcomes[tp] = parsed.get(tp) or Outcome(
                        ErrorCode.UNKNOWN_SERVER_ERROR, "the leader's response did not mention it"
                    )
            return outcomes

        return self._run(list(items), attempt, deadline, retry_codes)

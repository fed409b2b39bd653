"""The admin client's plumbing, which its operations share: the cluster connection it owns (or
borrows), deadlines, and the retry engine (``kctl.client.leader_requests``, shared with the consumer's
offset lookup) — ``_run`` retries the items of an operation that failed retriably, with backoff, until
the deadline; ``_per_leader`` sends one pipelined request per partition leader.

An admin client that owns its cluster connection waits for a broker that does not answer at most
``request.timeout.ms`` (``ClusterClient.give_up_after``), not ``default.api.timeout.ms``: a broker
killed while it leads partitions is refused at once on every retry but stays in the metadata until
its ZooKeeper session expires, and an operator's command must answer from the brokers that are up
(what waits on the silent one fails with ``BrokerNotAnsweringError``, named by
``cluster.not_answering()``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Self

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.config import ClientConfig
from kctl.client.leader_requests import Outcome, per_leader, retry_pending
from kctl.common.topic_partition import TopicPartition

__all__ = ["AdminBase", "Outcome"]


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
            self.cluster.give_up_after = self.cluster.config.request_timeout
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
        """``leader_requests.retry_pending`` on this client's cluster."""
        return retry_pending(self.cluster, keys, attempt, deadline, retry_codes)

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
        """``leader_requests.per_leader`` on this client's cluster."""
        return per_leader(
            self.cluster, items, api_key, build, parse, deadline,
            min_version=min_version, retry_codes=retry_codes,
        )

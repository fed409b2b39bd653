"""Cluster health (``kctl cluster health``, as ``rpk cluster health``): whether a running cluster is
healthy and, when not, why — no controller, brokers down, leaderless partitions, under-replicated
partitions — from one overview (DescribeCluster and Metadata, internal topics included).

A broker is down when a partition names it as a replica but it is not among the live brokers (a
broker that hosts no replica and is gone cannot be told from one that never existed: the Kafka
protocol lists live brokers only). A partition is leaderless when its leader is -1 and
under-replicated when its ISR is smaller than its replica set."""

from __future__ import annotations

import dataclasses
from typing import Any

from kctl.client.admin.client import AdminClient
from kctl.client.admin.overview import ClusterOverview, cluster_overview

__all__ = ["ClusterHealth", "cluster_health", "health_of"]


@dataclasses.dataclass(frozen=True)
class ClusterHealth:
    """The verdict and what it rests on (partitions as "topic/partition", sorted)."""

    controller_id: int
    live_brokers: tuple[int, ...]
    brokers_down: tuple[int, ...]
    leaderless_partitions: tuple[str, ...]
    under_replicated_partitions: tuple[str, ...]

    @property
    def reasons(self) -> list[str]:
        """Why the cluster is unhealthy (empty: it is healthy)."""
        reasons = []
        if self.controller_id < 0:
            reasons.append("no controller")
        if self.brokers_down:
            reasons.append(f"brokers down: {', '.join(map(str, self.brokers_down))}")
        if self.leaderless_partitions:
            reasons.append(f"{len(self.leaderless_partitions)} leaderless partition(s)")
        if self.under_replicated_partitions:
            reasons.append(f"{len(self.under_replicated_partitions)} under-replicated partition(s)")
        return reasons

    @property
    def healthy(self) -> bool:
        return not self.reasons

    def document(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "unhealthy_reasons": self.reasons,
            "controller_id": self.controller_id,
            "live_brokers": list(self.live_brokers),
            "brokers_down": list(self.brokers_down),
            "leaderless_partitions": list(self.leaderless_partitions),
            "under_replicated_partitions": list(self.under_replicated_partitions),
        }


def health_of(overview: ClusterOverview) -> ClusterHealth:
    live = {b.node_id for b in overview.brokers}
    named: set[int] = set()
    leaderless: list[str] = []
    under_replicated: list[str] = []
    for topic in overview.topics:
        for p in topic.partitions:
            named.update(p.replicas)
            where = f"{topic.name}/{p.partition}"
            if p.leader < 0:
                leaderless.append(where)
            if len(p.isr) < len(p.replicas):
                under_replicated.append(where)
    return ClusterHealth(
        controller_id=overview.controller_id,
        live_brokers=tuple(sorted(live)),
        brokers_down=tuple(sorted(named - live)),
        leaderless_partitions=tuple(sorted(leaderless)),
        under_replicated_partitions=tuple(sorted(under_replicated)),
    )


def cluster_health(admin: AdminClient) -> ClusterHealth:
    """The cluster's health now (every topic, internal ones included)."""
    overview, _ = cluster_overview(admin, include_internal=True)
    return health_of(overview)

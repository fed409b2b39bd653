"""`kctl topic describe` as data: each topic's id, partition count, replication factor and
non-default configs, and per partition its leadership (Metadata), log start offset and high
watermark (ListOffsets to the leaders) and size on disk at the leader (DescribeLogDirs) — answered
from the brokers that answer.

A broker that does not answer (killed, hung: given up after ``request.timeout.ms``, see
``kctl.client.admin.base``) costs at most that long, once: its partitions keep the leadership the
metadata gives, are marked ``available: false`` and have no offsets or size, and the report names
the broker (``not_answering``) so the caller can say the answer is incomplete. A partition without
a leader (offline) is not asked at all.

The health filters are kafka-topics.sh's: ``under_replicated`` (ISR smaller than the replicas),
``unavailable`` (no leader, or a leader that does not answer: Kafka's "leader not live") and
``under_min_isr`` (ISR smaller than the topic's ``min.insync.replicas``); given together, a
partition matching any is kept, and topics with no such partition are left out.

::

    with AdminClient("127.0.0.1:9092") as admin:
        report = topic_report(admin, admin.list_topics(), HealthFilter(under_replicated=True))
        if report.matched:
            ...                              # under-replicated partitions, in report.documents
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kctl.client.admin.client import AdminClient
from kctl.client.admin.overview import partition_document
from kctl.client.admin.partition_sizes import leader_partition_sizes, leaders_of
from kctl.client.admin.results import TopicConfigs, TopicDescription
from kctl.common.topic_partition import TopicPartition

__all__ = ["HealthFilter", "TopicReport", "topic_report"]


@dataclasses.dataclass(frozen=True)
class HealthFilter:
    """Which unhealthy partitions to keep (any of those set); none set: keep every partition."""

    under_replicated: bool = False
    unavailable: bool = False
    under_min_isr: bool = False

    @property
    def active(self) -> bool:
        return self.under_replicated or self.unavailable or self.under_min_isr

    def keeps(self, partition: dict[str, Any], min_isr: int) -> bool:
        """Whether ``partition`` (a report's partition document) is kept."""
        if not self.active:
            return True
        return (
            (self.under_replicated and len(partition["isr"]) < len(partition["replicas"]))
            or (self.unavailable and not partition["available"])
            or (self.under_min_isr and len(partition["isr"]) < min_isr)
        )


@dataclasses.dataclass
class TopicReport:
    """The topics described (``documents``: one JSON-ready object per topic, with its
    ``partitions``), what went wrong on the way (``warnings``: one line each), the leaders that did
    not answer (id -> why), and how many partitions the health filter kept (``matched``)."""

    documents: list[dict[str, Any]]
    warnings: list[str] = dataclasses.field(default_factory=list)
    not_answering: dict[int, str] = dataclasses.field(default_factory=dict)
    matched: int = 0

    @property
    def incomplete(self) -> bool:
        """Whether some offsets or sizes are missing because a broker did not answer."""
        return bool(self.not_answering)


def topic_report(
    admin: AdminClient,
    topics: Sequence[TopicDescription],
    health: HealthFilter | None = None,
    *,
    all_configs: bool = False,
) -> TopicReport:
    """Describe ``topics`` (described already, without errors) as the module docstring says; with
    ``all_configs`` each document also lists every config (``all_configs``: value, default,
    source, read-only)."""
    health = health or HealthFilter()
    # partitions without a leader have no offsets to ask for (and asking would wait for an election)
    tps = [TopicPartition(t.name, p.partition) for t in topics for p in t.partitions if p.leader >= 0]
    earliest = admin.list_offsets(tps, "earliest") if tps else {}
    latest = admin.list_offsets(tps, "latest") if tps else {}
    configs = {c.name: c for c in admin.describe_topic_configs([t.name for t in topics])}
    report = TopicReport([])
    sizes = _partition_sizes(admin, topics, report)
    # the leaders that did not answer: only they leave a gap (another silent broker changes nothing)
    leaders = {p.leader for t in topics for p in t.partitions if p.leader >= 0}
    report.not_answering = {b: why for b, why in admin.cluster.not_answering().items() if b in leaders}
    silent = set(report.not_answering)
    for topic in topics:
        topic_configs = configs.get(topic.name)
        if topic_configs is not None and not topic_configs.ok:
            report.warnings.append(
                f"topic {topic.name!r}: cannot describe its configs: {topic_configs.error}"
            )
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition)
            start, end = earliest.get(tp), latest.get(tp)
            for what, result in (("log start offset", start), ("high watermark", end)):
                if result is not None and not result.ok and p.leader not in silent:
                    report.warnings.append(f"partition {tp}: no {what}: {result.error}")
            partitions.append(
                {
                    **partition_document(p),
                    "available": p.leader >= 0 and p.leader not in silent,
                    "log_start_offset": start.offset if start is not None and start.ok else None,
                    "high_watermark": end.offset if end is not None and end.ok else None,
                    "size": sizes.get(tp),
                }
            )
        min_isr = _min_insync_replicas(topic_configs)
        partitions = [p for p in partitions if health.keeps(p, min_isr)]
        report.matched += len(partitions) if health.active else 0
        if health.active and not partitions:
            continue
        report.documents.append(_topic_document(topic, topic_configs, partitions, all_configs))
    return report


def _topic_document(
    topic: TopicDescription,
    topic_configs: TopicConfigs | None,
    partitions: list[dict[str, Any]],
    all_configs: bool,
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "topic": topic.name,
        "topic_id": str(topic.topic_id) if topic.topic_id else None,
        "internal": topic.internal,
        "partition_count": len(topic.partitions),
        "replication_factor": topic.replication_factor,
        "configs": {
            e.name: e.value for e in (topic_configs.non_default() if topic_configs is not None else [])
        },
        "partitions": partitions,
    }
    if all_configs:
        entries = topic_configs.entries if topic_configs is not None else ()
        document["all_configs"] = [e.as_row() for e in entries]
    return document


def _partition_sizes(
    admin: AdminClient, topics: Sequence[TopicDescription], report: TopicReport
) -> dict[TopicPartition, int]:
    """Each led partition's size on disk at its leader, in bytes (``partition_sizes``). A leader
    that cannot say is a warning (unless it did not answer: the caller names those); its
    partitions are left out."""
    found = leader_partition_sizes(admin, leaders_of(topics))
    silent = admin.cluster.not_answering()
    problems: dict[int, list[str]] = {}
    for leader, error in found.failed.items():
        if leader not in silent:
            problems.setdefault(leader, []).append(f"broker {leader}: no partition sizes: {error}")
    for leader, log_dir in found.offline_dirs:
        problems.setdefault(leader, []).append(f"broker {leader}: log dir {log_dir.path}: {log_dir.error}")
    for leader in sorted(problems):
        report.warnings.extend(problems[leader])
    return found.sizes


def _min_insync_replicas(topic_configs: TopicConfigs | None) -> int:
    for entry in topic_configs.entries if topic_configs is not None else ():
        if entry.name == "min.insync.replicas" and entry.value is not None:
            try:
                return int(entry.value)
            except ValueError:
                break
    return 1

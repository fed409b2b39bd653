"""The end-state checks of the fault-injection tests: nothing acknowledged is lost or duplicated,
and every replica of a partition holds the same log.

- `check_acked_read_once(acked, records)`: every acknowledged delivery is read back exactly once,
  at its acknowledged offset, in send order per partition; returns the list of violations.
- `wait_for_identical_replicas(cluster, view, topic, partitions)`: polls (with a deadline) until the
  batches below the high watermark are the same on every assigned replica (offsets, leader epochs,
  producer ids, CRCs and records, read with ``kctl log dump --deep -f jsonl``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from kctl.testing import LocalCluster
from kctl.testing.cluster_clients import Delivery, high_watermarks, replica_batches
from kctl.testing.cluster_view import ClusterView, ClusterWaitTimeout


def _sequence(value: str) -> int:
    return int(value.rsplit("-", 1)[1])


def check_acked_read_once(acked: Iterable[Delivery], records: dict[int, list[tuple[int, str]]]) -> list[str]:
    """Violations of: each acked (partition, offset, value) is at that offset; each acked value occurs
    once in the topic; per partition, a producer's values appear in the order they were sent."""
    problems: list[str] = []
    at = {partition: dict(rows) for partition, rows in records.items()}
    counts = Counter(value for rows in records.values() for _, value in rows)
    for delivery in acked:
        found = at.get(delivery.partition, {}).get(delivery.offset)
        if found != delivery.value:
            problems.append(
                f"acked {delivery.value} at {delivery.partition}/{delivery.offset}, read {found!r} there"
            )
        if counts[delivery.value] != 1:
            problems.append(f"acked {delivery.value} read {counts[delivery.value]} times")
    for partition, rows in records.items():
        by_prefix: dict[str, int] = {}
        for offset, value in rows:
            prefix = value.rsplit("-", 1)[0]
            if "-" not in value:
                continue
            sequence = _sequence(value)
            if sequence <= by_prefix.get(prefix, -1):
                problems.append(
                    f"partition {partition} offset {offset}: {value} after {prefix}-{by_prefix[prefix]}"
                )
            by_prefix[prefix] = max(sequence, by_prefix.get(prefix, -1))
    return problems[:50]


def replica_logs(
    cluster: LocalCluster, view: ClusterView, topic: str, partition: int, up_to: int
) -> dict[int, list[dict[str, Any]]]:
    return {
        broker_id: replica_batches(cluster.broker(broker_id).data_dir, topic, partition, up_to)
        for broker_id in view.assignment(topic).get(partition, [])
    }


def _first_difference(logs: dict[int, list[dict[str, Any]]]) -> str:
    items = sorted(logs.items())
    reference_id, reference = items[0]
    for broker_id, batches in items[1:]:
        for mine, theirs in zip(reference, batches, strict=False):
            if mine != theirs:
                return f"broker {reference_id} has {mine} where broker {broker_id} has {theirs}"
        if len(reference) != len(batches):
            return f"broker {reference_id} has {len(reference)} batches, broker {broker_id} {len(batches)}"
    return "none"


def wait_for_identical_replicas(
    cluster: LocalCluster, view: ClusterView, topic: str, partitions: Iterable[int], *, timeout: float = 60.0
) -> None:
    """Raise `ClusterWaitTimeout` unless, before the deadline, every partition's replicas hold the
    same batches below its high watermark (which must cover at least one batch)."""
    partitions = list(partitions)
    ends = high_watermarks(cluster.bootstrap_servers, topic, partitions)
    for partition in partitions:
        deadline = time.monotonic() + timeout
        while True:
            logs = replica_logs(cluster, view, topic, partition, ends[partition])
            if len(logs) > 1 and all(batches == next(iter(logs.values())) for batches in logs.values()):
                break
            if time.monotonic() > deadline:
                difference = _first_difference(logs) if logs else "no replicas"
                raise ClusterWaitTimeout(
                    f"{topic}-{partition}: replicas {sorted(logs)} differ below the high watermark "
                    f"{ends[partition]} after {timeout:.0f}s: {difference}"
                )
            time.sleep(0.5)

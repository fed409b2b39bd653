"""Replica placement for new topics and partitions: Kafka's ``AdminUtils.assignReplicasToBrokers``.

Rack-unaware: brokers sorted by id; partition p's first replica (its preferred leader) is broker
``(p + start) mod n`` (a random start index spreads leaders of different topics); its followers are
shifted from it by ``1 + (shift + j) mod (n - 1)``, the shift (random at first) growing by one every
n partitions, so that followers spread too. Rack-aware (every broker has ``broker.rack``): the same
over the brokers listed alternately by rack (rack a's first, rack b's first, ..., rack a's second),
and a follower is skipped while its rack, or itself, already holds a replica of the partition unless
every rack (broker) already does. When only some brokers have a rack, placement is rack-unaware
(Kafka's ``RackAwareMode.Safe``).

``start_index`` and ``replica_shift`` may be fixed (tests and explicit calls); -1 draws them at
random, as Kafka does."""

from __future__ import annotations

import random
from collections.abc import Mapping

__all__ = ["InvalidReplicationFactorError", "assign_replicas", "rack_alternated_brokers"]


class InvalidReplicationFactorError(ValueError):
    """More replicas asked for than there are brokers (INVALID_REPLICATION_FACTOR)."""


def _replica_index(first: int, shift: int, j: int, count: int) -> int:
    return (first + 1 + (shift + j) % (count - 1)) % count


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Broker ids ordered alternately by rack (racks sorted by name, brokers by id within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        queue = queues[index]
        if queue:
            result.append(queue.pop(0))
        index = (index + 1) % len(queues)
    return result


def assign_replicas(
    brokers: Mapping[int, str | None] | list[int],
    partitions: range,
    replication_factor: int,
    *,
    start_index: int = -1,
    replica_shift: int = -1,
) -> dict[int, tuple[int, ...]]:
    """Replicas of ``partitions`` (numbered from ``partitions.start``) over ``brokers`` (id -> rack,
    or just ids). Raises InvalidReplicationFactorError."""
    racks: dict[int, str | None] = (
        dict(brokers) if isinstance(brokers, Mapping) else dict.fromkeys(brokers)
    )
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Replication factor must be larger than 0, not {replication_factor}"
        )
    if replication_factor > len(racks):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(racks)}."
        )
    rack_aware = all(rack is not None for rack in racks.values())
    if rack_aware:
        ordered = rack_alternated_brokers({b: str(r) for b, r in racks.items()})
        rack_count = len({str(r) for r in racks.values()})
    else:
        ordered = sorted(racks)
        rack_count = 1
    count = len(ordered)
    start = start_index if start_index >= 0 else random.randrange(count)
    shift = replica_shift if replica_shift >= 0 else random.randrange(count)
    result: dict[int, tuple[int, ...]] = {}
    for partition in partitions:
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        leader = ordered[first]
        replicas = [leader]
        if not rack_aware:
            for j in range(replication_factor - 1):
                replicas.append(ordered[_replica_index(first, shift, j, count)])
        else:
            used_racks = {racks[leader]}
            k = 0
            for _ in range(replication_factor - 1):
                while True:
                    broker = ordered[_replica_index(first, shift * rack_count, k, count)]
                    k += 1
                    rack = racks[broker]
                    if (rack not in used_racks or len(used_racks) == rack_count) and (
                        broker not in replicas or len(replicas) == count
                    ):
                        replicas.append(broker)
                        used_racks.add(rack)
                        break
        result[partition] = tuple(replicas)
    return result

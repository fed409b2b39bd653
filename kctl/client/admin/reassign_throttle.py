"""The replication throttle of a reassignment, set and cleared as Kafka's reassignment tool does:
the topics' ``leader.replication.throttled.replicas`` (the current replicas of each moving
partition: they serve the copies) and ``follower.replication.throttled.replicas`` (the added ones:
they fetch), and the brokers' ``leader/follower.replication.throttled.rate``.

::

    outcome = set_reassignment_throttle(admin, [(tp, current, target)], 10_000_000)
    outcome.brokers                         # the brokers throttled
    outcome.topic_failures, outcome.broker_failures   # what was refused (the caller warns)
    ...
    clear_reassignment_throttle(admin, plan)            # once the plan is complete
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from kctl.client.admin.reassignments import THROTTLED_REPLICAS_CONFIGS, throttled_replicas
from kctl.client.admin.results import Result
from kctl.client.errors import KafkaError
from kctl.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kctl.client.admin.client import AdminClient

__all__ = ["ThrottleOutcome", "clear_reassignment_throttle", "set_reassignment_throttle"]


@dataclasses.dataclass
class ThrottleOutcome:
    """The brokers throttled (sorted), and the topics ((topic, result)) and brokers (a result
    named by the broker id) that refused their part."""

    brokers: list[int]
    topic_failures: list[tuple[str, Result]] = dataclasses.field(default_factory=list)
    broker_failures: list[Result] = dataclasses.field(default_factory=list)


def set_reassignment_throttle(
    admin: AdminClient,
    moves: Iterable[tuple[TopicPartition, Sequence[int], Sequence[int]]],
    rate: int,
) -> ThrottleOutcome:
    """Throttle the copying of ``moves`` ((partition, current replicas, target replicas)) to
    ``rate`` bytes/s: the topics' throttled replicas, then the rate on every broker involved (a
    current or a target replica). Set it before submitting the reassignment."""
    moves = list(moves)
    outcome = ThrottleOutcome(sorted({b for _, current, target in moves for b in (*current, *target)}))
    for topic, configs in sorted(throttled_replicas(moves).items()):
        result = admin.alter_configs(topic, set={k: v for k, v in configs.items() if v})
        if not result.ok:
            outcome.topic_failures.append((topic, result))
    for result in admin.set_replication_throttle(outcome.brokers, rate):
        if not result.ok:
            outcome.broker_failures.append(result)
    return outcome


def clear_reassignment_throttle(admin: AdminClient, plan: Mapping[TopicPartition, Sequence[int]]) -> None:
    """Remove the throttle of the reassignment ``plan`` (partition -> target replicas), as Kafka's
    --verify does once it is complete: the topics' throttled replicas, and the rate on the plan's
    brokers and every live broker. Best effort: the first error stops it, silently."""
    with contextlib.suppress(KafkaError):
        for topic in sorted({tp.topic for tp in plan}):
            admin.alter_configs(topic, delete=THROTTLED_REPLICAS_CONFIGS)
        brokers = {b for r in plan.values() for b in r}
        brokers |= {b.node_id for b in admin.describe_cluster().brokers}
        admin.set_replication_throttle(brokers, None)

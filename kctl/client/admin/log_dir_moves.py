"""Moving a topic's replicas on one broker to another of its log dirs, as a plan: which replicas
move where (``plan_log_dir_moves``), starting the moves (``start_log_dir_moves``,
AlterReplicaLogDirs) and waiting for them (``wait_for_log_dir_moves``, polling DescribeLogDirs: a
move is done when the replica is in its destination and no future replica is left).

Each partition of a plan has a status: ``planned``, ``in place`` (there already: nothing to move),
``moving`` (started), ``moved`` (done), or the Kafka error name the broker refused it with.

::

    plan = plan_log_dir_moves(admin, broker=1, topic="orders", to="/data2")
    start_log_dir_moves(admin, plan)
    wait_for_log_dir_moves(admin, plan, wait=30)
    plan.refused, plan.in_progress
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kctl.client.admin.results import LogDirDescription
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import error_name

if TYPE_CHECKING:
    from kctl.client.admin.client import AdminClient

__all__ = [
    "IN_PLACE",
    "MOVED",
    "MOVING",
    "PLANNED",
    "LogDirMoveError",
    "LogDirMovePlan",
    "plan_log_dir_moves",
    "start_log_dir_moves",
    "wait_for_log_dir_moves",
]

PLANNED, IN_PLACE, MOVING, MOVED = "planned", "in place", "moving", "moved"
POLL_INTERVAL = 0.2
"""Seconds between two looks at the broker's log dirs while waiting (bounded by the wait)."""


class LogDirMoveError(Exception):
    """Nothing can be planned: the broker is not in the cluster, the destination is not one of its
    log dirs, or it hosts none of the partitions named."""


@dataclasses.dataclass
class LogDirMovePlan:
    """The partitions to move (``wanted``, sorted) on ``broker`` to log dir ``to``, where each is now
    (``current``: partition -> log dir, every replica of the topic on the broker) and each one's
    status."""

    broker: int
    to: str
    wanted: list[TopicPartition]
    current: dict[TopicPartition, str]
    status: dict[TopicPartition, str]

    @property
    def moving(self) -> list[TopicPartition]:
        """The partitions not in ``to`` yet (whatever their status)."""
        return [tp for tp in self.wanted if self.current[tp] != self.to]

    @property
    def refused(self) -> list[TopicPartition]:
        """The moves the broker refused."""
        return [tp for tp in self.moving if self.status[tp] not in (PLANNED, MOVING, MOVED)]

    @property
    def in_progress(self) -> bool:
        """Whether a started move has not finished yet."""
        return any(self.status[tp] == MOVING for tp in self.moving)


def _where(dirs: Iterable[LogDirDescription]) -> dict[TopicPartition, str]:
    return {r.topic_partition: d.path for d in dirs for r in d.replicas if not r.is_future}


def plan_log_dir_moves(
    admin: AdminClient, broker: int, topic: str, to: str, partitions: Iterable[int] | None = None
) -> LogDirMovePlan:
    """Plan moving ``topic``'s replicas on ``broker`` (``partitions`` of it, default every one the
    broker hosts) to its log dir ``to``. Raises ``LogDirMoveError`` when there is nothing to plan."""
    brokers = sorted(b.node_id for b in admin.describe_cluster().brokers)
    if broker not in brokers:
        raise LogDirMoveError(
            f"no broker {broker} in the cluster (its brokers: {', '.join(map(str, brokers))})"
        )
    dirs = admin.describe_log_dirs([broker])[broker]
    if to not in {d.path for d in dirs}:
        raise LogDirMoveError(f"{to} is not a log dir of broker {broker} ({', '.join(d.path for d in dirs)})")
    current = {tp: path for tp, path in _where(dirs).items() if tp.topic == topic}
    wanted = sorted(current if partitions is None else {TopicPartition(topic, p) for p in partitions})
    missing = [tp for tp in wanted if tp not in current]
    if not wanted or missing:
        raise LogDirMoveError(f"broker {broker} hosts no replica of {missing[0] if missing else topic}")
    status = {tp: (IN_PLACE if current[tp] == to else PLANNED) for tp in wanted}
    return LogDirMovePlan(broker, to, wanted, current, status)


def start_log_dir_moves(admin: AdminClient, plan: LogDirMovePlan) -> None:
    """Start the plan's moves (AlterReplicaLogDirs): each becomes ``moving``, or the error name the
    broker refused it with."""
    moving = plan.moving
    if not moving:
        return
    codes = admin.alter_replica_log_dirs(plan.broker, {tp: plan.to for tp in moving})
    for tp in moving:
        code = codes.get(tp, 0)
        plan.status[tp] = error_name(code) if code else MOVING


def wait_for_log_dir_moves(
    admin: AdminClient,
    plan: LogDirMovePlan,
    wait: float,
    *,
    interval: float = POLL_INTERVAL,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait up to ``wait`` seconds for the started moves to finish, looking every ``interval``
    seconds (and once more at the end): each finished one becomes ``moved``. ``plan.in_progress``
    tells whether some did not finish in time."""
    deadline = clock() + wait
    while wait > 0 and plan.in_progress:
        described = admin.describe_log_dirs([plan.broker])[plan.broker]
        futures = {r.topic_partition for d in described for r in d.replicas if r.is_future}
        placed = _where(described)
        for tp in plan.moving:
            if plan.status[tp] == MOVING and placed.get(tp) == plan.to and tp not in futures:
                plan.status[tp] = MOVED
        if clock() >= deadline:
            break
        sleep(interval)

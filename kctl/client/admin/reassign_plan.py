"""Partition reassignment plans as kafka-reassign-partitions.sh reads and writes them, with no I/O:
Kafka's JSON formats, Kafka's replica placement for ``--generate``, the moves a plan makes (what each
copies), the brokers a plan names that are not in the cluster, and the progress of a submitted plan
(``--verify``).

::

    topics to move   {"version":1,"topics":[{"topic":"orders"}]}
    plan             {"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,3],
                                                  "log_dirs":["any","any"]}]}

`assign_replicas` is Kafka's rack-unaware placement (AdminUtils.assignReplicasToBrokersRackUnaware):
a random start broker, leaders round-robin over the brokers, each further replica shifted by an
amount that grows once per full round, so replicas spread over the brokers.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kctl.common.topic_partition import TopicPartition

Assignment = dict[TopicPartition, tuple[int, ...]]


class PlanError(ValueError):
    """A plan or topics file that is not in Kafka's format, or a plan that cannot be made."""


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise PlanError(f"the {what} is not JSON: {error}") from None


def parse_topics_to_move(text: str) -> list[str]:
    """The topic names of a ``--topics-to-move-json-file``."""
    data = _json(text, "topics-to-move file")
    topics = data.get("topics") if isinstance(data, dict) else None
    if not isinstance(topics, list) or not all(isinstance(t, dict) and "topic" in t for t in topics):
        raise PlanError('the topics-to-move file must be {"version":1,"topics":[{"topic":"name"},...]}')
    names = list(dict.fromkeys(str(t["topic"]) for t in topics))
    if not names:
        raise PlanError("the topics-to-move file names no topic")
    return names


def parse_plan(text: str) -> Assignment:
    """The target replicas of each partition of a reassignment plan (``log_dirs`` other than "any"
    are refused: kctl brokers place replicas in their log dirs themselves)."""
    data = _json(text, "reassignment file")
    partitions = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(partitions, list) or not partitions:
        raise PlanError(
            'the reassignment file must be {"version":1,"partitions":[{"topic":..,"partition":..,'
            '"replicas":[..]},...]} with at least one partition'
        )
    plan: Assignment = {}
    for entry in partitions:
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = tuple(int(r) for r in entry["replicas"])
        except (KeyError, TypeError, ValueError):
            raise PlanError(f"bad partition entry in the reassignment file: {entry!r}") from None
        if tp in plan:
            raise PlanError(f"partition {tp.topic}-{tp.partition} appears more than once")
        if not replicas or len(set(replicas)) != len(replicas):
            raise PlanError(
                f"partition {tp.topic}-{tp.partition}: replicas {list(replicas)} are empty or repeat"
            )
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                raise PlanError(f"partition {tp.topic}-{tp.partition}: log_dirs must match the replicas")
            if any(d != "any" for d in log_dirs):
                raise PlanError(f'partition {tp.topic}-{tp.partition}: only "any" log dirs are supported')
        plan[tp] = replicas
    return plan


def format_plan(assignment: Mapping[TopicPartition, Sequence[int]]) -> dict[str, Any]:
    """Kafka's plan JSON (as a dict) for an assignment, partitions sorted."""
    return {
        "version": 1,
        "partitions": [
            {
                "topic": tp[0],
                "partition": tp[1],
                "replicas": list(replicas),
                "log_dirs": ["any"] * len(replicas),
            }
            for tp, replicas in sorted(assignment.items())
        ],
    }


def assign_replicas(
    broker_ids: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    replica_shift: int | None = None,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Kafka's rack-unaware placement of ``num_partitions`` partitions with ``replication_factor``
    replicas over ``broker_ids`` (in the order given); the start index and the first shift are
    random unless given."""
    n = len(broker_ids)
    if replication_factor < 1:
        raise PlanError(f"replication factor {replication_factor} must be at least 1")
    if replication_factor > n:
        raise PlanError(f"replication factor {replication_factor} is larger than the {n} brokers given")
    rng = rng or random.Random()
    start = start_index if start_index is not None else rng.randrange(n)
    shift = replica_shift if replica_shift is not None else rng.randrange(n)
    result: dict[int, tuple[int, ...]] = {}
    for partition in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [broker_ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(broker_ids[(first + 1 + (shift + j) % (n - 1)) % n])
        result[partition] = tuple(replicas)
    return result


def generate(
    current: Mapping[str, Mapping[int, Sequence[int]]],
    broker_ids: Sequence[int],
    *,
    rng: random.Random | None = None,
) -> Assignment:
    """A proposed assignment of every partition of the ``current`` topics (topic -> partition ->
    replicas) over ``broker_ids``, keeping each topic's replication factor."""
    brokers = list(dict.fromkeys(broker_ids))
    if not brokers:
        raise PlanError("no brokers to move the partitions to")
    rng = rng or random.Random()
    proposed: Assignment = {}
    for topic, partitions in sorted(current.items()):
        if not partitions:
            continue
        factor = len(partitions[min(partitions)])
        try:
            placed = assign_replicas(brokers, max(partitions) + 1, factor, rng=rng)
        except PlanError as error:
            raise PlanError(f"topic {topic!r}: {error}") from None
        for partition in partitions:
            proposed[TopicPartition(topic, partition)] = placed[partition]
    return proposed


@dataclasses.dataclass(frozen=True)
class Move:
    """What a plan does to one partition: its replicas now and after, the replicas that must copy
    the whole log (``adding``) and those that drop it (``removing``), the partition's size at its
    leader (None: unknown) and so the bytes the move copies."""

    topic_partition: TopicPartition
    current: tuple[int, ...]
    target: tuple[int, ...]
    size: int | None = None

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.current)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.current if r not in self.target)

    @property
    def changes(self) -> bool:
        return self.current != self.target

    @property
    def bytes_to_copy(self) -> int | None:
        return None if self.size is None else self.size * len(self.adding)


def moves(
    current: Mapping[TopicPartition, Sequence[int]],
    plan: Mapping[TopicPartition, Sequence[int]],
    sizes: Mapping[TopicPartition, int] | None = None,
) -> list[Move]:
    """The move of every partition of ``plan`` (sorted); `PlanError` for a partition that does not
    exist."""
    missing = [tp for tp in plan if tp not in current]
    if missing:
        names = ", ".join(f"{tp[0]}-{tp[1]}" for tp in sorted(missing))
        raise PlanError(f"no such partition: {names}")
    sizes = sizes or {}
    return [
        Move(TopicPartition(*tp), tuple(current[tp]), tuple(plan[tp]), sizes.get(TopicPartition(*tp)))
        for tp in sorted(plan)
    ]


def absent_brokers(planned: Iterable[Move], live: Iterable[int]) -> dict[int, list[TopicPartition]]:
    """The target replicas of the moves that change something which are not brokers of the cluster
    (``live``: its brokers now), each with the partitions that name it. The controller refuses such
    a move (INVALID_REPLICA_ASSIGNMENT), so a plan naming one is refused before anything is sent."""
    known = set(live)
    absent: dict[int, list[TopicPartition]] = {}
    for move in planned:
        if move.changes:
            for broker in move.target:
                if broker not in known:
                    absent.setdefault(broker, []).append(move.topic_partition)
    return dict(sorted(absent.items()))


COMPLETE = "complete"
IN_PROGRESS = "in progress"
NOT_APPLIED = "not applied"


def verify(
    plan: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
    ongoing: Iterable[TopicPartition],
) -> dict[TopicPartition, str]:
    """Each planned partition's state, as kafka-reassign-partitions.sh --verify says it: in progress
    (the controller lists it), complete (its replicas are the target), else not applied (no
    reassignment runs and the replicas differ: it was cancelled, or never submitted)."""
    running = set(ongoing)
    states: dict[TopicPartition, str] = {}
    for tp, target in sorted(plan.items()):
        if tp in running:
            states[tp] = IN_PROGRESS
        elif tuple(current.get(tp, ())) == tuple(target):
            states[tp] = COMPLETE
        else:
            states[tp] = NOT_APPLIED
    return states

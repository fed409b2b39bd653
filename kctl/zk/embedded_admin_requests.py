"""The embedded registry's requests to the controller (kctl.zk.registry.AdminRequests), in memory
only: a cluster of one broker has no replica to move and no other replica to elect, so what
clients ask (AlterPartitionReassignments, ElectLeaders) is refused — but a reassignment to the
replicas a partition has, which is done already. The requests exist so that the controller runs the
same code in both modes. Built by kctl.zk.embedded.EmbeddedRegistry with its lock, its topics and
its listeners."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager

from kctl.zk.model import OngoingReassignment, TopicRecord, describe_ongoing
from kctl.zk.registry import ADMIN, ELECTION_TYPES, AdminRequests

__all__ = ["EmbeddedAdminRequests"]


class EmbeddedAdminRequests(AdminRequests):
    """The embedded registry's requests to the controller, in memory only. A cluster of one has no
    replica to move and no other replica to elect: the requests exist so that the controller runs
    the same code in both modes, and what clients ask (AlterPartitionReassignments, ElectLeaders)
    is refused — but a reassignment to the replicas a partition has, which is done already."""

    def __init__(
        self,
        locked: Callable[[], AbstractContextManager[None]],
        get_topic: Callable[[str], TopicRecord | None],
        notify: Callable[[str], None],
    ) -> None:
        self._locked = locked  # the registry's lock, held while the registry is started
        self._get_topic = get_topic
        self._notify = notify  # the registry's listeners
        self._reassignments: dict[tuple[str, int], tuple[int, ...]] = {}
        self._preferred: set[tuple[str, int]] | None = None

    # -- reassignments -----------------------------------------------------------------------------
    def reassignment_requests(self) -> dict[tuple[str, int], tuple[int, ...]]:
        with self._locked():
            return dict(self._reassignments)

    def set_reassignment_requests(self, requests: dict[tuple[str, int], tuple[int, ...]]) -> None:
        with self._locked():
            self._reassignments = {k: tuple(v) for k, v in requests.items()}
        self._notify(ADMIN)

    def request_reassignments(
        self, targets: Mapping[tuple[str, int], Iterable[int]]
    ) -> dict[tuple[str, int], str]:
        refused: dict[tuple[str, int], str] = {}
        with self._locked():
            for (topic, partition), replicas in targets.items():
                entry = self._get_topic(topic)
                if entry is None or tuple(replicas) != entry.assignment.get(partition):
                    refused[topic, partition] = "an embedded broker cannot move replicas"
        return refused

    def withdraw_reassignments(self, partitions: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        with self._locked():
            removed = set(partitions) & set(self._reassignments)
            for key in removed:
                del self._reassignments[key]
        if removed:
            self._notify(ADMIN)
        return removed

    def ongoing_reassignments(
        self, assignments: Mapping[str, Mapping[int, tuple[int, ...]]]
    ) -> dict[tuple[str, int], OngoingReassignment]:
        with self._locked():
            requested = dict(self._reassignments)
            started = {
                name: (dict(topic.assignment), dict(topic.adding_replicas), dict(topic.removing_replicas))
                for name in assignments
                if (topic := self._get_topic(name)) is not None
            }
        return describe_ongoing(requested, started, assignments)

    # -- elections ---------------------------------------------------------------------------------
    def request_elections(
        self, election_type: str, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], str]:
        if election_type not in ELECTION_TYPES:
            raise ValueError(f"election type {election_type!r}: one of {', '.join(ELECTION_TYPES)}")
        return {key: "no other replica to elect" for key in partitions}

    def preferred_election_requests(self) -> set[tuple[str, int]] | None:
        with self._locked():
            return None if self._preferred is None else set(self._preferred)

    def set_preferred_election_requests(self, partitions: set[tuple[str, int]] | None) -> None:
        with self._locked():
            self._preferred = None if partitions is None else set(partitions)
        self._notify(ADMIN)

    def unclean_election_requests(self) -> set[tuple[str, int]]:
        return set()  # a cluster of one: its only replica always leads

    def finish_unclean_election_requests(self, partitions: set[tuple[str, int]]) -> None:
        return None

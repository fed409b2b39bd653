"""The cluster metadata registry: the interfaces the broker uses for cluster metadata, whichever
backend stores it, one per part of the metadata.

The registry owns the cluster-wide facts: the cluster id, the live brokers, the controller and its
epoch, the topics (topic id, replica assignment, config overrides), each partition's state
(leader, leader epoch, ISR), the requests made to the controller, the security metadata and the
client quotas. Two backends implement it: kctl.zk.embedded (one broker, persisted under its data
directory) and kctl.zk.zookeeper (ZooKeeper, in Kafka's layout). Each part is an interface of its
own, and code that needs one part is typed against that part alone:

- ``TopicStore``: the topics and their partitions' states, with the controller's fenced writes;
- ``ClusterMembership``: the cluster id, the live brokers' registrations, the controller's election
  and epoch, the controlled shutdown requests;
- ``ConfigStore``: topic config overrides and dynamic broker configs;
- ``AdminRequests``: what is asked of the controller — partition reassignments, preferred and
  unclean leader elections;
- ``SecurityStore`` (kctl.zk.security_store): SCRAM credentials and ACLs;
- ``QuotaStore`` (kctl.zk.quota_store): client quotas.

``Registry`` is their composition: one object that is a TopicStore, a ClusterMembership and a
ConfigStore, offers the other parts as properties (``admin_requests``, ``security_store``,
``quota_store``), and adds the lifecycle and the change listeners. The seeds' ZooKeeper consumer is
a client with a session of its own (kctl.zk.consumer_registry), not a part of the broker's registry.

The API is synchronous and thread-safe. Callers that run an event loop call it for admin
operations only and keep their own cache, refreshed when a listener reports a change. Listener
callbacks receive a short reason (one of REASONS) and may run on any thread, including the
registry's own watcher thread: they must return quickly (hand the work to the caller's loop,
e.g. with ``loop.call_soon_threadsafe``). Both backends call listeners synchronously after a
change made through the registry itself, so that a caller's cache refresh is scheduled before the
mutating call returns; the ZooKeeper backend also calls them, from its watcher thread, for changes
made by other processes. A notification means "may have changed": spurious ones are allowed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Protocol, Self

from kctl.zk.model import (
    BrokerRegistration,
    ControllerFence,
    OngoingReassignment,
    PartitionState,
    PartitionStateUpdate,
    RegistryError,
    TopicRecord,
    UnknownTopicError,
)
from kctl.zk.quota_store import QuotaStore
from kctl.zk.security_store import SecurityStore

__all__ = [
    "ADMIN",
    "BROKERS",
    "CONFIGS",
    "CONTROLLER",
    "ELECTION_TYPES",
    "PARTITIONS",
    "PREFERRED",
    "REASONS",
    "SESSION",
    "TOPICS",
    "UNCLEAN",
    "AdminRequests",
    "ClusterMembership",
    "ConfigStore",
    "Listener",
    "Registry",
    "TopicStore",
]

log = logging.getLogger("kctl.zk")

BROKERS = "brokers"
"""A broker registered or went away."""
TOPICS = "topics"
"""A topic was created or deleted, or gained partitions."""
CONTROLLER = "controller"
"""The controller changed (or was lost: try_become_controller may now win)."""
CONFIGS = "configs"
"""Some topic's config overrides, or some dynamic broker configs, changed."""
PARTITIONS = "partitions"
"""Some partition's state (leader, leader epoch, ISR) changed."""
ADMIN = "admin"
"""A request to the controller changed: /admin/reassign_partitions,
/admin/preferred_replica_election or a controlled shutdown request."""
REASONS = (BROKERS, TOPICS, CONTROLLER, CONFIGS, PARTITIONS, ADMIN)
SESSION = "session"
"""The registry's session changed state (see Registry.session_state); not a metadata change."""
SESSION_CONNECTED, SESSION_SUSPENDED, SESSION_EXPIRED = "connected", "suspended", "expired"

Listener = Callable[[str], None]

PREFERRED, UNCLEAN = "preferred", "unclean"
"""The election types of AdminRequests.request_elections (ElectLeaders' election types)."""
ELECTION_TYPES = (PREFERRED, UNCLEAN)


class TopicStore(Protocol):
    """The topics (topic id, replica assignment; their config overrides are read with them) and
    their partitions' states (leader, leader epoch, ISR), including the controller's fenced writes."""

    def write_batch(self) -> contextlib.AbstractContextManager[None]:
        """A block whose writes (made on this thread) are stored together: the embedded registry
        rewrites its file once at the end of the block, as a whole or not at all. The ZooKeeper
        backend writes as it goes (each of its writes is already one multi-op)."""
        return contextlib.nullcontext()

    @abstractmethod
    def create_topic(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        configs: dict[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> TopicRecord:
        """Create a topic with partitions 0..n-1 assigned to replicas, and its config overrides.
        A topic id is generated unless given. Raises TopicExistsError, InvalidTopicError,
        InvalidReplicaAssignmentError."""

    def create_topics(
        self, topics: Sequence[tuple[str, dict[int, tuple[int, ...]], dict[str, str]]]
    ) -> list[TopicRecord | RegistryError]:
        """`create_topic` for each (name, assignment, configs): per topic its record or the error
        that refused it. The ZooKeeper backend writes them in a few multi-ops (one round trip per
        chunk instead of three per topic, and one watch notification)."""
        outcomes: list[TopicRecord | RegistryError] = []
        for name, assignment, configs in topics:
            try:
                outcomes.append(self.create_topic(name, assignment, configs))
            except RegistryError as error:
                outcomes.append(error)
        return outcomes

    @abstractmethod
    def delete_topic(self, name: str) -> None:
        """Delete a topic, its partition states and its config overrides. Raises
        UnknownTopicError."""

    def delete_topics(self, names: Sequence[str]) -> list[RegistryError | None]:
        """Delete several topics; per name, None or the error (UnknownTopicError). This default
        deletes them one by one; ZooKeeper deletes them in one multi-op."""
        outcomes: list[RegistryError | None] = []
        for name in names:
            try:
                self.delete_topic(name)
                outcomes.append(None)
            except RegistryError as error:
                outcomes.append(error)
        return outcomes

    @abstractmethod
    def add_partitions(self, name: str, new_assignment: dict[int, tuple[int, ...]]) -> TopicRecord:
        """Add partitions (only the new ones, numbered on from the existing ones); returns the
        updated topic. Raises UnknownTopicError, InvalidPartitionsError,
        InvalidReplicaAssignmentError."""

    @abstractmethod
    def topics(self) -> dict[str, TopicRecord]:
        """Every topic, by name."""

    @abstractmethod
    def get_topic(self, name: str) -> TopicRecord | None:
        """One topic, or None."""

    @abstractmethod
    def set_topic_assignment(
        self,
        name: str,
        assignment: dict[int, tuple[int, ...]],
        adding_replicas: dict[int, tuple[int, ...]],
        removing_replicas: dict[int, tuple[int, ...]],
        fence: ControllerFence,
    ) -> TopicRecord:
        """The controller's rewrite of a topic's replica assignment (reassignment), fenced like
        set_partition_states; the topic id, the partitions and the configs stay. Raises
        UnknownTopicError, ControllerMovedError."""

    @abstractmethod
    def set_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        *,
        expected_partition_epoch: int | None = None,
    ) -> PartitionState:
        """Write a partition's state; returns it as stored, with the partition epoch the registry
        assigned (0 on the first write, +1 on each later one; ``state.partition_epoch`` is
        ignored). With ``expected_partition_epoch``, write only if the stored state still has that
        epoch (-1: only if there is none yet), else raise PartitionStateConflictError. Raises
        UnknownTopicError for an unknown topic or partition."""

    @abstractmethod
    def alter_partition_states(
        self, updates: list[PartitionStateUpdate]
    ) -> dict[tuple[str, int], PartitionState | RegistryError]:
        """The partition leaders' write of their ISR changes (Kafka's AlterPartition): each update
        is stored or refused on its own, conditional on its expected partition epoch (at least 0: a
        leader only changes a state that exists). Returns, by (topic, partition), the state as
        stored (with its new partition epoch) or the error that refused it:
        PartitionStateConflictError when the stored state moved on, UnknownTopicError when the
        partition is gone. ZooKeeper pipelines the writes: one round trip for the whole batch, so a
        leader of a wide topic whose followers all caught up at once writes their ISRs in one go."""

    @abstractmethod
    def set_partition_states(
        self, updates: list[PartitionStateUpdate], fence: ControllerFence
    ) -> dict[tuple[str, int], PartitionState]:
        """The controller's write: all ``updates`` at once (ZooKeeper: one multi-op), each
        conditional on its expected partition epoch, and all conditional on ``fence`` still being
        the current controller's. Returns the states as stored, by (topic, partition). Raises
        ControllerMovedError when the controller epoch moved on (nothing is written), else
        PartitionStateConflictError when some state changed under us (nothing is written),
        UnknownTopicError for a partition that does not exist."""

    @abstractmethod
    def partition_states(self, topic: str) -> dict[int, PartitionState]:
        """The partitions of ``topic`` that have a state. Raises UnknownTopicError."""

    def partition_states_of(
        self, topics: Mapping[str, TopicRecord], deleted: set[str] | None = None
    ) -> dict[tuple[str, int], PartitionState]:
        """The states of every partition of ``topics`` (as read by `topics()`: their assignments name
        the partitions) that has one; a topic deleted meanwhile is left out (and added to ``deleted``
        when given). The ZooKeeper backend
        reads them all in one pipelined batch (a refresh of the whole cluster's metadata costs one
        round trip, not one per topic)."""
        states: dict[tuple[str, int], PartitionState] = {}
        for name in topics:
            try:
                found = self.partition_states(name)
            except UnknownTopicError:
                if deleted is not None:
                    deleted.add(name)
                continue
            for partition, state in found.items():
                states[(name, partition)] = state
        return states


class ClusterMembership(Protocol):
    """Who is in the cluster and who controls it: the cluster id, the live brokers' registrations,
    the controller's election and epoch, and the controlled shutdown requests."""

    @abstractmethod
    def cluster_id(self) -> str:
        """The cluster id; created on first use (22-character URL-safe base64 of a random UUID)
        and stable afterwards."""

    @abstractmethod
    def register_broker(self, reg: BrokerRegistration) -> None:
        """Register a live broker (ephemeral: it lasts as long as this registry's session).
        Registering again from the same registry replaces the registration. Raises
        BrokerIdInUseError when another session holds the id."""

    @abstractmethod
    def wait_for_stale_registration(self, broker_id: int, timeout_s: float | None = None) -> None:
        """Before registering: wait (at most ``timeout_s``; by default as long as a dead process's
        session can take to expire) until no other session holds ``broker_id``'s registration, as
        a broker restarted right after a kill -9 finds its previous run's. Raises
        BrokerIdInUseError when it is still held then."""

    @abstractmethod
    def unregister_broker(self, broker_id: int) -> None:
        """Withdraw a registration made by this registry; no-op if there is none."""

    @abstractmethod
    def live_brokers(self) -> list[BrokerRegistration]:
        """Every registered broker, by broker id."""

    @abstractmethod
    def try_become_controller(self, broker_id: int) -> bool:
        """Run for controller: True if ``broker_id`` (through this registry) now is the
        controller, having bumped the controller epoch when newly elected; False if another
        broker is."""

    @abstractmethod
    def controller_fence(self) -> ControllerFence | None:
        """The fence of the controllership this registry last won (the controller epoch and the
        /controller_epoch znode version it wrote), or None if it never won or has resigned."""

    @abstractmethod
    def resign_controller(self) -> None:
        """Give up controllership won through this registry (controlled shutdown); no-op if none."""

    @abstractmethod
    def controller_id(self) -> int | None:
        """The controller's broker id, or None when there is no controller."""

    @abstractmethod
    def controller_epoch(self) -> int:
        """The current controller epoch (0 before the first election)."""

    @abstractmethod
    def request_controlled_shutdown(self, broker_id: int) -> None:
        """The shutting-down broker's request (ZooKeeper: ephemeral
        /kctl/controlled_shutdown/<broker id> holding {"state":"requested"})."""

    @abstractmethod
    def controlled_shutdown_requests(self) -> dict[int, tuple[str, int]]:
        """Pending and answered requests: broker id -> (state, partitions still led by it)."""

    @abstractmethod
    def answer_controlled_shutdown(self, broker_id: int, remaining_partitions: int) -> None:
        """The controller's answer: state "done", with how many partitions the broker still leads
        (0: it may stop now). No-op when the request is gone."""

    @abstractmethod
    def announce_unclean_restart(self, broker_id: int) -> None:
        """A broker restarting after an unclean shutdown says so before it takes any role
        (ZooKeeper: ephemeral /kctl/unclean_restart/<broker id>): it may have lost what it had not
        fsynced, so the controller takes it out of every ISR (leadership moves to another ISR
        member) before it leads or counts as in sync again (as KIP-966's unclean shutdown
        detection does)."""

    @abstractmethod
    def unclean_restarts(self) -> set[int]:
        """The brokers whose unclean restart the controller has not handled yet."""

    @abstractmethod
    def finish_unclean_restart(self, broker_id: int) -> None:
        """The controller has taken the broker out of every ISR: the broker may take its roles."""

    @abstractmethod
    def report_offline_replicas(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> None:
        """A log dir of the broker failed: ``partitions`` are every replica it can no longer serve
        (ZooKeeper: ephemeral /kctl/offline_replicas/<broker id>, then Kafka's log dir event
        notification); the controller moves their leadership and takes the broker out of their ISR."""

    @abstractmethod
    def offline_replicas(self) -> dict[int, set[tuple[str, int]]]:
        """The offline replicas of each broker (those reported by its current session)."""

    @abstractmethod
    def finish_log_dir_events(self) -> None:
        """The controller has read the offline replicas: the log dir event notifications go."""

    @abstractmethod
    def report_unreachable_leader(self, broker_id: int, leader_id: int, unreachable: bool) -> None:
        """Follower ``broker_id`` has had no answer from ``leader_id`` for ``replica.lag.time.max.ms``
        (``unreachable``), or hears from it again (ZooKeeper: ephemeral
        /kctl/unreachable_leaders/<broker id>-<leader id>, created or deleted; a change wakes the
        controller)."""

    @abstractmethod
    def unreachable_leaders(self) -> dict[int, set[int]]:
        """The leaders each follower reports it cannot reach (the controller keeps the live ones)."""


class ConfigStore(Protocol):
    """Config overrides: a topic's, and the dynamic broker configs (a broker's and the
    cluster-wide defaults). Every change is announced to every broker (listeners: CONFIGS)."""

    @abstractmethod
    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides with ``configs``. Raises UnknownTopicError."""

    @abstractmethod
    def broker_configs(self, entity: str) -> dict[str, str]:
        """The dynamic broker configs stored for ``entity``: a broker id, or ``"<default>"`` (the
        cluster-wide defaults). Empty when none are stored."""

    @abstractmethod
    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace ``entity``'s dynamic broker configs, and tell every broker (listeners: CONFIGS)."""


class AdminRequests(Protocol):
    """What is asked of the controller: partition reassignments (/admin/reassign_partitions),
    preferred leader elections (/admin/preferred_replica_election) and unclean ones
    (/kctl/elect_leaders). The controller reads them and removes what it handled; the
    AlterPartitionReassignments and ElectLeaders handlers (and Kafka's own tools, through the
    znodes) add to them, merging with what is there. Every change is announced (listeners: ADMIN)."""

    # -- reassignments -----------------------------------------------------------------------------
    @abstractmethod
    def reassignment_requests(self) -> dict[tuple[str, int], tuple[int, ...]]:
        """/admin/reassign_partitions: (topic, partition) -> the target replicas ({} when none)."""

    @abstractmethod
    def set_reassignment_requests(self, requests: dict[tuple[str, int], tuple[int, ...]]) -> None:
        """Replace /admin/reassign_partitions with ``requests`` (none: delete it)."""

    @abstractmethod
    def request_reassignments(
        self, targets: Mapping[tuple[str, int], Iterable[int]]
    ) -> dict[tuple[str, int], str]:
        """Add target replica lists to the reassignment requests (an entry for the same partition
        is replaced). Returns the partitions this registry refuses to move, with why: the embedded
        registry, a cluster of one, moves no replica (a target equal to the partition's replicas
        is done already)."""

    @abstractmethod
    def withdraw_reassignments(self, partitions: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        """Remove the requests of ``partitions`` (the znode goes when none is left); returns the
        partitions that had one."""

    @abstractmethod
    def ongoing_reassignments(
        self, assignments: Mapping[str, Mapping[int, tuple[int, ...]]]
    ) -> dict[tuple[str, int], OngoingReassignment]:
        """Every partition of the topics in ``assignments`` (topic -> partition -> current
        replicas, as the caller knows them) being reassigned: those the controller has started (the
        replicas, adding and removing replicas the topic holds) and those only requested so far
        (reported as Kafka does: replicas = target + current, adding = target - current, removing
        = current - target). Raises RegistryError when a request cannot be read."""

    # -- elections ---------------------------------------------------------------------------------
    @abstractmethod
    def request_elections(
        self, election_type: str, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], str]:
        """Ask for leader elections of ``partitions``: PREFERRED (/admin/preferred_replica_election)
        or UNCLEAN (/kctl/elect_leaders); ValueError for another type. Returns the partitions this
        registry refuses to elect, with why (the embedded registry, a cluster of one, has no other
        replica to elect)."""

    @abstractmethod
    def preferred_election_requests(self) -> set[tuple[str, int]] | None:
        """/admin/preferred_replica_election: the partitions listed, or None when there is no
        request (an empty set: a request without partitions)."""

    @abstractmethod
    def set_preferred_election_requests(self, partitions: set[tuple[str, int]] | None) -> None:
        """Write /admin/preferred_replica_election (None: delete it)."""

    @abstractmethod
    def unclean_election_requests(self) -> set[tuple[str, int]]:
        """/kctl/elect_leaders: partitions ElectLeaders asked to elect uncleanly (empty when none)."""

    @abstractmethod
    def finish_unclean_election_requests(self, partitions: set[tuple[str, int]]) -> None:
        """Remove the handled ``partitions`` from /kctl/elect_leaders (later requests stay)."""


class Registry(TopicStore, ClusterMembership, ConfigStore, ABC):
    """Cluster metadata: every part of it, on one backend — a TopicStore, a ClusterMembership and a
    ConfigStore itself, the other parts as properties. Use as a context manager, or call
    start() before anything else and close() at the end."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._listeners_lock = threading.Lock()
        self._dispatch_lock = threading.RLock()  # one notification at a time; remove_listener waits for it

    # -- lifecycle ---------------------------------------------------------------------------------
    @abstractmethod
    def start(self) -> None:
        """Connect / load the stored metadata. Raises RegistryUnavailableError when the store
        cannot be reached."""

    @abstractmethod
    def close(self) -> None:
        """Release everything: the broker registration and controllership go away (they are
        ephemeral). Idempotent."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def session_state(self) -> str:
        """SESSION_CONNECTED, SESSION_SUSPENDED (connection down, the session may still be alive) or
        SESSION_EXPIRED (the ephemeral registrations are gone; it stays so until they are made again
        in a new session). Listeners hear SESSION when it changes. The embedded registry is always
        connected."""
        return SESSION_CONNECTED

    # -- the other parts ---------------------------------------------------------------------------
    @property
    @abstractmethod
    def admin_requests(self) -> AdminRequests:
        """The requests to the controller, on this registry's backend."""

    @property
    @abstractmethod
    def security_store(self) -> SecurityStore:
        """SCRAM credentials and ACLs, on this registry's backend."""

    @property
    @abstractmethod
    def quota_store(self) -> QuotaStore:
        """Client quotas, on this registry's backend."""

    # -- change notification -----------------------------------------------------------------------
    def add_listener(self, callback: Listener) -> None:
        """Call ``callback(reason)`` whenever metadata may have changed (see the module docstring)."""
        with self._listeners_lock:
            self._listeners.append(callback)

    def remove_listener(self, callback: Listener) -> None:
        """Stop calling ``callback``; no-op if it is not a listener. Once this returns the callback
        is not called again: a notification being delivered on another thread (a ZooKeeper watch)
        is waited for."""
        with self._dispatch_lock, self._listeners_lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    def _notify(self, reason: str) -> None:
        """Call every listener; a failing listener is logged and does not stop the others.
        Notifications are delivered one at a time (listeners only record or enqueue)."""
        with self._dispatch_lock:
            with self._listeners_lock:
                listeners = list(self._listeners)
            for callback in listeners:
                try:
                    callback(reason)
                except Exception:
                    log.exception("registry listener %r failed on %r", callback, reason)

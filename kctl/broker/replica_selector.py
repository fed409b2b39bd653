"""KIP-392 (fetch from the closest replica): which replica a partition's leader tells a consumer to
fetch from, its *preferred read replica*.

A broker with ``replica.selector.class`` set (Kafka's class name
``org.apache.kafka.common.replica.RackAwareReplicaSelector``, or kctl's alias ``rack-aware``) answers
a consumer's Fetch v11+ for a partition it leads with the replica the selector picks. Unset (Kafka's
default) it always serves the fetch itself. The rack-aware selector, as Kafka's:

- a consumer that sends no rack (``client.rack`` empty) is served by the leader;
- otherwise the candidates are the replicas whose broker's ``broker.rack`` is the consumer's rack;
  none: the leader; the leader among them: the leader;
- else the most caught-up candidate: the highest log end offset, then the shortest time since it was
  last caught up, then the highest broker id.

The candidates besides the leader are what Kafka's ``ReplicaManager`` offers the selector: the
followers in the ISR whose broker is live (registered: a broker without an endpoint has no rack) and
whose log holds the fetch offset (log start <= offset <= log end, as the follower's last fetch told).
The leader itself is a candidate with its own log end offset, caught up now.

``preferred_read_replica`` returns -1 when the pick is the leader: the response then carries the
records as usual. Otherwise the fetch response names that broker in the partition's
``preferred_read_replica``, with no records (kctl.broker.apis.fetch answers at once)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kctl.broker.partition import Partition

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTOR_ALIASES = {"rack-aware": RACK_AWARE_SELECTOR, RACK_AWARE_SELECTOR: RACK_AWARE_SELECTOR}
NO_PREFERRED_REPLICA = -1


def selector_class_name(value: str) -> str:
    """``replica.selector.class`` as stored and described: Kafka's class name (the alias resolved);
    ValueError for a selector kctl does not have."""
    name = SELECTOR_ALIASES.get(value.strip())
    if name is None:
        raise ValueError(f"kctl has the selector {RACK_AWARE_SELECTOR} (alias rack-aware), not {value!r}")
    return name


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the selector sees it: its broker, that broker's rack (None: none, or the
    broker is not live), its log end offset, and the milliseconds since it was last caught up."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


class ReplicaSelector(Protocol):
    def select(self, client_rack: str, leader: ReplicaView, followers: Sequence[ReplicaView]) -> ReplicaView:
        """The replica a consumer in ``client_rack`` should read from (``leader`` for the leader)."""
        ...


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector (module docstring)."""

    def select(self, client_rack: str, leader: ReplicaView, followers: Sequence[ReplicaView]) -> ReplicaView:
        if not client_rack or leader.rack == client_rack:
            return leader
        same_rack = [r for r in followers if r.rack == client_rack]
        if not same_rack:
            return leader
        return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms, r.broker_id))


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names (None: unset, the leader serves every fetch)."""
    if class_name is None:
        return None
    selector_class_name(class_name)  # the only one there is
    return RackAwareReplicaSelector()


def preferred_read_replica(
    selector: ReplicaSelector,
    partition: Partition,
    client_rack: str,
    fetch_offset: int,
    racks: Mapping[int, str | None],
    now_ms: int,
) -> int:
    """The broker a consumer in ``client_rack`` fetching ``partition`` (led here) at ``fetch_offset``
    should fetch from, or -1 for this leader. ``racks``: the rack of every live broker."""
    leader_id = partition.broker_id
    leader = ReplicaView(leader_id, racks.get(leader_id), partition.log_end_offset, 0)
    followers = [
        ReplicaView(replica, racks[replica], state.log_end_offset, now_ms - state.last_caught_up_ms)
        for replica, state in partition.followers.items()
        if replica in partition.isr
        and replica in racks
        and state.log_start_offset <= fetch_offset <= state.log_end_offset
    ]
    chosen = selector.select(client_rack, leader, followers)
    return NO_PREFERRED_REPLICA if chosen is leader else chosen.broker_id

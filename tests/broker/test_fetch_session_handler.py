"""The follower's side of a fetch session (kctl.protocol.fetch_session_handler): which
partitions each fetch lists and forgets, and how errors and lost answers start a new session.
(Followers fetching from leaders over sessions: tests/cluster/test_replication_cluster.py.)"""

from __future__ import annotations

from kctl.log.naming import TopicPartition
from kctl.protocol.errors import ErrorCode
from kctl.protocol.fetch_session_handler import FetchSessionHandler

A, B, C = (TopicPartition("t", i) for i in range(3))
MAX = 1 << 20


def opened(
    wanted: dict[TopicPartition, tuple[int, int, int, int]], session_id: int = 42
) -> FetchSessionHandler:
    handler = FetchSessionHandler()
    sid, epoch, to_send, forgotten = handler.next_request(wanted)
    assert (sid, epoch, to_send, forgotten) == (0, 0, wanted, [])
    assert handler.response(wanted, epoch, 0, session_id)
    return handler


def test_an_idle_follower_lists_nothing_and_a_moved_partition_alone() -> None:
    wanted = {A: (5, 1, 0, MAX), B: (7, 1, 0, MAX)}
    handler = opened(wanted)
    assert handler.next_request(wanted) == (42, 1, {}, [])
    assert handler.response(wanted, 1, 0, 42)
    moved = {A: (9, 1, 0, MAX), B: (7, 1, 0, MAX)}
    assert handler.next_request(moved) == (42, 2, {A: (9, 1, 0, MAX)}, [])


def test_new_partitions_are_listed_and_dropped_ones_forgotten() -> None:
    handler = opened({A: (5, 1, 0, MAX), B: (7, 1, 0, MAX)})
    now = {B: (7, 1, 0, MAX), C: (0, 3, 0, MAX)}
    assert handler.next_request(now) == (42, 1, {C: (0, 3, 0, MAX)}, [A])


def test_session_errors_and_lost_answers_start_over_with_a_full_fetch() -> None:
    wanted = {A: (5, 1, 0, MAX)}
    handler = opened(wanted)
    assert not handler.response(wanted, 1, ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    assert handler.next_request(wanted) == (42, 0, wanted, [])  # names the session: closes it
    handler = opened(wanted)
    assert not handler.response(wanted, 1, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert handler.next_request(wanted) == (0, 0, wanted, [])
    handler = opened(wanted)
    handler.reset()  # the request failed with the connection
    assert handler.next_request(wanted) == (42, 0, wanted, [])


def test_no_session_from_the_leader_keeps_fetches_full() -> None:
    wanted = {A: (5, 1, 0, MAX)}
    handler = opened(wanted, session_id=0)
    assert handler.next_request(wanted) == (0, 0, wanted, [])


def test_epochs_wrap_to_one() -> None:
    wanted = {A: (5, 1, 0, MAX)}
    handler = opened(wanted)
    handler.epoch = 0x7FFFFFFF
    assert handler.response(wanted, handler.epoch, 0, 42)
    assert handler.next_request(wanted)[1] == 1

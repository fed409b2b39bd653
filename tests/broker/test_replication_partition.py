"""The leader's replication bookkeeping and the follower's truncation decisions, on real logs in a
temporary directory without a network: high watermark = min log end offset over the ISR (never
decreasing), parked acks=all completion, ISR shrink/expand decisions, KIP-101/KIP-279 truncation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kctl.broker.partition import Partition
from kctl.broker.replication.channel import BrokerChannel
from kctl.broker.replication.fetcher import FetcherSettings, FetchState, ReplicaFetcher, whole_batches
from kctl.common.topic_partition import TopicPartition
from kctl.log.config import LogConfig
from kctl.log.log import Log
from kctl.protocol.errors import ErrorCode
from kctl.records.builder import RecordBatchBuilder

TP = TopicPartition("t", 0)


def batch(count: int = 1) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    return builder.build()


def new_log(path: Path, min_insync: int = 1) -> Log:
    config = LogConfig().with_overrides({"min.insync.replicas": str(min_insync)})
    return Log(path, TP, config, high_watermark_follows_log_end=False)


def leader(path: Path, isr: tuple[int, ...] = (1, 2, 3), min_insync: int = 1, epoch: int = 0) -> Partition:
    partition = Partition(
        TP,
        new_log(path, min_insync),
        leader_id=-1,
        leader_epoch=-1,
        replicas=(1, 2, 3),
        isr=(),
        broker_id=1,
        replicated=True,
    )
    partition.make_leader(epoch, isr, (1, 2, 3), 0, 0, now_ms=1000)
    return partition


def test_high_watermark_is_the_smallest_log_end_over_the_isr_and_never_decreases(tmp_path: Path) -> None:
    partition = leader(tmp_path)
    partition.log.append(batch(5), leader_epoch=0)
    assert not partition.maybe_advance_high_watermark()  # followers not heard from yet
    assert partition.high_watermark == 0
    partition.record_follower_fetch(2, 3, now_ms=1100)
    assert not partition.maybe_advance_high_watermark()  # follower 3 still unknown
    partition.record_follower_fetch(3, 5, now_ms=1100)
    assert partition.maybe_advance_high_watermark()
    assert partition.high_watermark == 3
    partition.record_follower_fetch(2, 5, now_ms=1200)
    partition.maybe_advance_high_watermark()
    assert partition.high_watermark == 5
    partition.record_follower_fetch(2, 1, now_ms=1300)  # a follower that truncated: HW stays
    assert not partition.maybe_advance_high_watermark()
    assert partition.high_watermark == 5


def test_a_leader_alone_in_the_isr_advances_on_append(tmp_path: Path) -> None:
    partition = leader(tmp_path, isr=(1,))
    partition.log.append(batch(4), leader_epoch=0)
    assert partition.maybe_advance_high_watermark()
    assert partition.high_watermark == 4


def test_make_leader_records_the_epoch_start(tmp_path: Path) -> None:
    partition = leader(tmp_path, epoch=0)
    partition.log.append(batch(3), leader_epoch=0)
    partition.make_follower(2, 1, (2, 3), (1, 2, 3), 1, 0)
    partition.make_leader(2, (1, 2, 3), (1, 2, 3), 2, 0, now_ms=5000)
    assert [(e.epoch, e.start_offset) for e in partition.log.leader_epoch_cache.entries] == [(0, 0), (2, 3)]
    assert partition.leader_epoch_start_offset == 3


def test_parked_acks_complete_when_the_high_watermark_passes_them(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int, int]:
        partition = leader(tmp_path, isr=(1, 2), min_insync=2)
        partition.log.append(batch(2), leader_epoch=0)
        first = partition.add_ack_waiter(2)
        assert not first.done()
        partition.record_follower_fetch(2, 2, now_ms=1100)
        partition.maybe_advance_high_watermark()
        done = first.result()
        # the ISR shrank below min.insync.replicas while a second produce waited
        partition.log.append(batch(1), leader_epoch=0)
        second = partition.add_ack_waiter(3)
        partition.update_state((1,), (1, 2, 3), 1, 0)
        assert not partition.maybe_advance_high_watermark()  # stands still below min ISR (KIP-966)
        partition.complete_acks()  # as ReplicaManager does once the shrink is stored
        after_shrink = second.result()
        partition.update_state((1, 2), (1, 2, 3), 2, 0)  # back at min ISR; then leadership goes
        partition.log.append(batch(1), leader_epoch=0)
        third = partition.add_ack_waiter(4)
        assert not third.done()
        partition.make_follower(2, 1, (2,), (1, 2, 3), 3, 0)
        return done, after_shrink, third.result()

    assert asyncio.run(scenario()) == (
        ErrorCode.NONE,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    )


def test_isr_shrink_and_expand_decisions(tmp_path: Path) -> None:
    partition = leader(tmp_path)  # followers caught up as of 1000 (they were in the ISR)
    partition.log.append(batch(10), leader_epoch=0)
    partition.record_follower_fetch(2, 10, now_ms=2000)  # at the log end: caught up now
    partition.record_follower_fetch(3, 4, now_ms=2000)  # behind
    assert partition.out_of_sync_replicas(now_ms=2500, lag_max_ms=1000) == {3}
    # a fetch reaching the log end the leader had at its previous fetch counts as caught up then
    partition.log.append(batch(2), leader_epoch=0)
    partition.record_follower_fetch(3, 10, now_ms=2600)
    assert partition.followers[3].last_caught_up_ms == 2000
    partition.record_follower_fetch(3, 12, now_ms=2700)
    assert partition.followers[3].last_caught_up_ms == 2700
    assert partition.out_of_sync_replicas(now_ms=3500, lag_max_ms=1000) == {2}

    partition.update_state((1, 2), (1, 2, 3), 1, 0)
    partition.record_follower_fetch(2, 12, now_ms=3600)
    partition.maybe_advance_high_watermark()
    assert partition.high_watermark == 12
    partition.record_follower_fetch(3, 11, now_ms=3600)
    assert not partition.replica_to_add(3)  # below the high watermark
    partition.record_follower_fetch(3, 12, now_ms=3700)
    assert partition.replica_to_add(3)
    assert not partition.replica_to_add(2)  # already in the ISR


def test_the_high_watermark_stands_still_while_the_isr_is_below_min_insync(tmp_path: Path) -> None:
    """KIP-966: with the ISR below min.insync.replicas the leader's own appends (acks=1) stay above
    the high watermark, so no consumer reads what an eligible replica that left the ISR may lack;
    it moves again once a replica rejoins."""
    partition = leader(tmp_path, isr=(1,), min_insync=2)
    partition.log.append(batch(4), leader_epoch=0)
    assert not partition.maybe_advance_high_watermark()
    assert partition.high_watermark == 0
    partition.record_follower_fetch(2, 4, now_ms=1100)
    partition.update_state((1, 2), (1, 2, 3), 1, 0)
    assert partition.maybe_advance_high_watermark()
    assert partition.high_watermark == 4
    # min.insync.replicas above the replica count counts as the replica count
    alone = Partition(
        TopicPartition("t", 1),
        new_log(tmp_path / "solo", 2),
        leader_id=-1,
        leader_epoch=-1,
        replicas=(1,),
        isr=(),
        broker_id=1,
        replicated=True,
    )
    alone.make_leader(0, (1,), (1,), 0, 0, now_ms=1000)
    alone.log.append(batch(2), leader_epoch=0)
    assert alone.maybe_advance_high_watermark()


def test_eligible_leader_replicas_are_the_replicas_that_leave_an_isr_below_min_insync(tmp_path: Path) -> None:
    partition = leader(tmp_path, isr=(1, 2, 3), min_insync=2)
    assert partition.elr_after((1, 2)) == ()  # still at min.insync.replicas: nobody eligible
    assert partition.elr_after((1,)) == (2, 3)  # both leave below it
    partition.update_state((1, 2), (1, 2, 3), 1, 0)
    assert partition.elr_after((1,)) == (2,)  # 3 left while the ISR was large enough: not eligible
    partition.update_state((1,), (1, 2, 3), 2, 0)
    partition.elr = (2,)
    assert partition.elr_after((1,)) == (2,)
    assert partition.elr_after((1, 3)) == ()  # back at min.insync.replicas: cleared


def test_parked_acks_fail_at_once_when_the_isr_drops_below_min_insync(tmp_path: Path) -> None:
    async def scenario() -> int:
        partition = leader(tmp_path, isr=(1, 2), min_insync=2)
        partition.log.append(batch(2), leader_epoch=0)
        waiting = partition.add_ack_waiter(2)
        partition.update_state((1,), (1, 2, 3), 1, 0)
        partition.complete_acks()
        return waiting.result()

    assert asyncio.run(scenario()) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def fetcher_state(path: Path, epochs: list[tuple[int, int]]) -> FetchState:
    """A follower log with ``count`` records in each (epoch, count)."""
    plog = new_log(path)
    for epoch, count in epochs:
        for _ in range(count):
            plog.append(batch(1), leader_epoch=epoch)
    partition = Partition(
        TP, plog, leader_id=9, leader_epoch=5, replicas=(1, 9), isr=(9,), broker_id=1, replicated=True
    )
    return FetchState(partition, leader_epoch=5)


def apply(state: FetchState, leader_epoch: int, end_offset: int) -> None:
    fetcher = ReplicaFetcher(9, BrokerChannel(9, "127.0.0.1", 1), FetcherSettings(broker_id=1))
    fetcher._apply_epoch_end(state, leader_epoch, end_offset)


def test_truncation_to_the_leaders_end_of_the_same_epoch(tmp_path: Path) -> None:
    state = fetcher_state(tmp_path, [(0, 3), (1, 4)])  # epoch 0: 0-2, epoch 1: 3-6
    apply(state, 1, 5)
    assert state.partition.log.log_end_offset == 5 and not state.needs_truncation


def test_no_truncation_when_the_leader_has_more(tmp_path: Path) -> None:
    state = fetcher_state(tmp_path, [(0, 3)])
    apply(state, 0, 10)
    assert state.partition.log.log_end_offset == 3 and not state.needs_truncation


def test_leader_answering_an_older_epoch_the_follower_has(tmp_path: Path) -> None:
    state = fetcher_state(tmp_path, [(0, 3), (2, 4)])  # the leader never had epoch 2
    apply(state, 0, 2)  # epoch 0 ends at 2 on the leader, at 3 here
    assert state.partition.log.log_end_offset == 2 and not state.needs_truncation


def test_leader_answering_an_epoch_the_follower_lacks_asks_again(tmp_path: Path) -> None:
    state = fetcher_state(tmp_path, [(0, 3), (2, 4)])
    apply(state, 1, 6)  # the follower has no epoch 1: cut to the end of its epoch 0, ask again
    assert state.partition.log.log_end_offset == 3
    assert state.needs_truncation
    assert state.partition.log.latest_epoch == 0


def test_unknown_epoch_falls_back_to_the_high_watermark(tmp_path: Path) -> None:
    state = fetcher_state(tmp_path, [(0, 5)])
    state.partition.log.update_high_watermark(2)
    apply(state, -1, -1)
    assert state.partition.log.log_end_offset == 2 and not state.needs_truncation


@pytest.mark.parametrize("cut", [0, 1, 12, 60, 61, 70])
def test_whole_batches_drops_a_trailing_partial_batch(cut: int) -> None:
    first, second = batch(2), batch(3)
    data = memoryview(first + second[:cut])
    assert bytes(whole_batches(data)) == first
    assert bytes(whole_batches(memoryview(first + second))) == first + second

"""A replica that takes the lead with an ISR of itself alone (an unclean election, or the last ISR
member left) may lack producers whose acknowledged batches only the other replicas held: its producer
state is marked incomplete, so those producers go on at any sequence as in Kafka, while a leader
elected from a full ISR keeps refusing a new producer's first batch at a sequence other than 0."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from replication_support import TP, three_replicas

from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.replica_manager import ReplicaManager
from kctl.log.producer_state import INCOMPLETE_MARKER, OutOfOrderSequenceError
from kctl.records.builder import RecordBatchBuilder
from kctl.zk.model import PartitionState


def _idempotent(sequence: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=42, producer_epoch=0, base_sequence=sequence)
    builder.append(1_700_000_000_000, None, b"v%d" % sequence)
    return builder.build()


@pytest.mark.parametrize(("isr", "incomplete"), [((1, 3), False), ((1,), True)])
def test_taking_the_lead_with_an_isr_of_itself_alone_marks_the_producer_state_incomplete(
    tmp_path: Path, isr: tuple[int, ...], incomplete: bool
) -> None:
    async def scenario() -> None:
        following = PartitionState(leader=2, leader_epoch=0, isr=(1, 2, 3))
        with three_replicas(tmp_path, following) as (registry, logs):
            metadata = MetadataCache(registry)
            metadata.refresh()
            replicas = ReplicaManager(1, logs, metadata, registry=registry, replicated=True)
            replicas.sync()
            partition = replicas.partitions[TP]
            assert not partition.is_leader and partition.log.knows_every_producer

            registry.set_partition_state("t", 0, PartitionState(leader=1, leader_epoch=1, isr=isr))
            metadata.refresh()
            replicas.sync()
            assert partition.is_leader
            assert partition.log.knows_every_producer is not incomplete
            marker = partition.log.directory / INCOMPLETE_MARKER
            assert marker.exists() is incomplete
            if incomplete:
                assert "ISR of itself alone" in marker.read_text()
                replicas.append(TP, _idempotent(7))  # a producer it may have lost goes on
                assert partition.log.log_end_offset == 1
            else:
                with pytest.raises(OutOfOrderSequenceError):
                    partition.log.append(_idempotent(7))
            await replicas.close()

    asyncio.run(scenario())

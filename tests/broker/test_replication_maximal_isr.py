"""The high watermark while an ISR expansion is being written (Kafka's "maximal ISR"): a follower
that caught up to the high watermark is joining the ISR; until the registry has the new ISR, the
high watermark may not pass that follower's log end offset. Otherwise records acknowledged in the
meantime (acks=all over the old ISR) would be missing on a replica the new ISR then contains, and
lost if it were elected — as a 3-broker failover test found under load."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from replication_support import TP, three_replicas

from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.replica_manager import ReplicaManager
from kctl.records.builder import RecordBatchBuilder
from kctl.zk.embedded import EmbeddedRegistry
from kctl.zk.model import PartitionState


def _records(count: int) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    return builder.build()


class SlowIsrWrites(EmbeddedRegistry):
    """An embedded registry whose partition-state writes wait until released (a slow ZooKeeper)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.holding = False

    def alter_partition_states(self, *args: Any, **kwargs: Any) -> Any:
        if self.holding:
            assert self.release.wait(10), "the ISR write was never released"
        return super().alter_partition_states(*args, **kwargs)


def test_the_high_watermark_waits_for_a_joining_follower(tmp_path: Path) -> None:
    async def scenario() -> None:
        state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2))
        with three_replicas(tmp_path, state, SlowIsrWrites) as (registry, logs):
            assert isinstance(registry, SlowIsrWrites)
            metadata = MetadataCache(registry)
            metadata.refresh()
            replicas = ReplicaManager(1, logs, metadata, registry=registry, replicated=True)
            replicas.sync()
            partition = replicas.partitions[TP]
            replicas.append(TP, _records(3))
            replicas.record_follower_fetch(partition, 2, 3)
            assert partition.high_watermark == 3
            registry.holding = True
            replicas.record_follower_fetch(partition, 3, 3)  # caught up: joins, the write is slow
            assert partition.isr_update_pending and partition.isr == (1, 2)

            replicas.append(TP, _records(2))  # acks=all over ISR [1, 2] would complete at 5 ...
            replicas.record_follower_fetch(partition, 2, 5)
            assert partition.high_watermark == 3, "passed the joining follower's log end offset"
            replicas.record_follower_fetch(partition, 3, 5)  # ... only once broker 3 has them too
            assert partition.high_watermark == 5

            registry.release.set()
            for _ in range(200):
                if not partition.isr_update_pending:
                    break
                await asyncio.sleep(0.01)
            assert partition.isr == (1, 2, 3)
            assert partition.isr_pending_additions == ()
            await replicas.close()

    asyncio.run(scenario())

"""Unit test of the leader's KIP-890 verifier (``kctl.broker.transaction.verification``) below the
network: in-memory stand-ins for the broker, the coordinator and the inter-broker channel (the
real path is tests/broker/test_transactions_verification.py and
tests/cluster/test_cluster_transactions_verification.py). What only a stand-in channel can show:
verifications for one coordinator are batched — one request in flight, the ones queued meanwhile
in the next request, one entry per transactional id — and a guard already verified is not asked
again."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kctl.broker.errors import ApiError
from kctl.broker.transaction.verification import TransactionVerifier
from kctl.log.naming import TopicPartition
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from kctl.records.builder import RecordBatchBuilder

COORDINATOR = 2


class StandInChannel:
    """Records each AddPartitionsToTxn; answers NONE for partition 0, INVALID_TXN_STATE otherwise,
    once ``release`` is set."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.release = asyncio.Event()

    async def request(self, api_key: int, version: int, body: Any, *, timeout: float | None = None) -> Any:
        self.requests.append(body)
        await self.release.wait()
        results = [
            AddPartitionsToTxnResult(
                transactional_id=t.transactional_id,
                topic_results=[
                    AddPartitionsToTxnTopicResult(
                        name=topic.name,
                        results_by_partition=[
                            AddPartitionsToTxnPartitionResult(
                                partition_index=p,
                                partition_error_code=ErrorCode.NONE
                                if p == 0
                                else ErrorCode.INVALID_TXN_STATE,
                            )
                            for p in topic.partitions
                        ],
                    )
                    for topic in t.topics
                ],
            )
            for t in body.transactions
        ]
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)

    async def close(self) -> None:
        pass


def _verifier(channel: StandInChannel) -> TransactionVerifier:
    partition = SimpleNamespace(
        leader_epoch=0, log=SimpleNamespace(producer_state=SimpleNamespace(producers={}))
    )
    broker = SimpleNamespace(
        broker_id=1,
        config={"transaction.partition.verification.enable": True},
        replicas=SimpleNamespace(leader_partition=lambda tp: partition),
    )
    coordinator = SimpleNamespace(coordinator_for=lambda tid: COORDINATOR)
    return TransactionVerifier(broker, coordinator, lambda node: channel)  # type: ignore[arg-type]


def _produce(tid: str, producer_id: int, partition: int) -> tuple[str, ProduceRequest]:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    builder.append(0, None, b"v")
    request = ProduceRequest(
        transactional_id=tid,
        acks=1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(
                name="t", partition_data=[PartitionProduceData(index=partition, records=builder.build())]
            )
        ],
    )
    return tid, request


def test_verifications_for_one_coordinator_are_batched_and_cached() -> None:
    async def scenario() -> None:
        channel = StandInChannel()
        verifier = _verifier(channel)
        first = asyncio.create_task(verifier.verify_produce(*_produce("a", 10, 0)))
        await asyncio.sleep(0)  # the first request is sent, its answer held back
        queued = [
            asyncio.create_task(verifier.verify_produce(*_produce(tid, pid, partition)))
            for tid, pid, partition in (("b", 11, 0), ("c", 12, 1), ("b", 11, 2))
        ]
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(channel.requests) == 1  # one in flight; the others wait for it
        channel.release.set()
        verdicts = await asyncio.gather(first, *queued)
        assert len(channel.requests) == 2  # the three queued ones went together
        second = channel.requests[1].transactions
        assert [(t.transactional_id, t.producer_id, t.verify_only) for t in second] == [
            ("b", 11, True),
            ("c", 12, True),
        ]
        assert [[(topic.name, topic.partitions) for topic in t.topics] for t in second] == [
            [("t", [0, 2])],
            [("t", [1])],
        ]
        tp0 = TopicPartition("t", 0)
        verdicts[0].admit(tp0)  # NONE: admitted
        refused = verdicts[2]
        with pytest.raises(ApiError) as refusal:
            refused.admit(TopicPartition("t", 1))
        assert refusal.value.code == ErrorCode.INVALID_TXN_STATE

        cached = await verifier.verify_produce(*_produce("a", 10, 0))  # verified before: not asked again
        assert len(channel.requests) == 2
        assert cached is not None
        cached.admit(tp0)
        verifier.on_marker(tp0, 10)  # the transaction ended: the guard is gone
        with pytest.raises(ApiError) as refusal:
            cached.admit(tp0)
        assert refusal.value.code == ErrorCode.INVALID_TXN_STATE
        await verifier.close()

    asyncio.run(scenario())

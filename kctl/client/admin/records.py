"""Offset and record admin calls, sent to each partition's leader: list offsets (ListOffsets:
earliest, latest, max-timestamp or by time; the consumer's lookup, whose names ``EARLIEST``,
``LATEST``, ``MAX_TIMESTAMP``, ``OFFSET_SPECS``, ``OffsetSpec`` and ``OffsetResult`` this module
offers too) and delete records below an offset (DeleteRecords)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kctl.client.admin.base import AdminBase, Outcome
from kctl.client.admin.results import DeleteRecordsResult
from kctl.client.cluster import Deadline
from kctl.client.consumer.offsets import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    OFFSET_SPECS,
    OffsetResult,
    list_offsets,
)
from kctl.client.consumer.offsets import ListOffsetsSpec as OffsetSpec
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey
from kctl.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "OFFSET_SPECS",
    "OffsetResult",
    "OffsetSpec",
    "RecordAdmin",
]


class RecordAdmin(AdminBase):
    """Offsets and records (see the module docstring)."""

    def list_offsets(
        self,
        topic_partitions: Iterable[TopicPartition] | Mapping[TopicPartition, OffsetSpec],
        spec: OffsetSpec = "latest",
        *,
        isolation_level: int = 0,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetResult]:
        """Offsets of partitions (ListOffsets, to each leader): ``spec`` is ``"earliest"`` (the log
        start offset), ``"latest"`` (the high watermark), ``"max-timestamp"`` (the record with the
        largest timestamp) or a timestamp in ms (the first offset at or after it; -1 if none).
        A mapping gives each partition its own spec. ``isolation_level`` 1 is READ_COMMITTED.
        The consumer's lookup (``kctl.client.consumer.offsets.list_offsets``) answers it."""
        return list_offsets(
            self.cluster, topic_partitions, spec, isolation_level=isolation_level, timeout=timeout
        )

    def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout: float | None = None
    ) -> dict[TopicPartition, DeleteRecordsResult]:
        """Delete the records below each offset (DeleteRecords, to each leader): the log start offset
        moves up to it. Offset -1 means the high watermark (delete everything)."""
        items = {TopicPartition(*tp): int(o) for tp, o in offsets.items()}
        if not items:
            return {}
        deadline = self._deadline(timeout)

        def build(group: dict[TopicPartition, int], version: int, deadline: Deadline) -> DeleteRecordsRequest:
            by_topic: dict[str, list[DeleteRecordsPartition]] = {}
            for tp, offset in group.items():
                by_topic.setdefault(tp.topic, []).append(
                    DeleteRecordsPartition(partition_index=tp.partition, offset=offset)
                )
            return DeleteRecordsRequest(
                topics=[DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                timeout_ms=self._request_timeout_ms(deadline),
            )

        def parse(response: Any) -> dict[TopicPartition, Outcome]:
            return {
                TopicPartition(t.name, p.partition_index): Outcome(p.error_code, None, p.low_watermark)
                for t in response.topics
                for p in t.partitions
            }

        outcomes = self._per_leader(items, ApiKey.DELETE_RECORDS, build, parse, deadline)
        results = {}
        for tp in items:
            outcome = outcomes[tp]
            low = outcome.payload
            results[tp] = (
                DeleteRecordsResult(tp, error_code=outcome.error_code, error_message=outcome.error_message)
                if outcome.error_code
                else DeleteRecordsResult(tp, low if low is not None else -1)
            )
        return results

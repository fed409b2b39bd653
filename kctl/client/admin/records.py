"""Offset and record admin calls, sent to each partition's leader: list offsets (ListOffsets:
earliest, latest, max-timestamp or by time) and delete records below an offset (DeleteRecords)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kctl.client.admin.base import AdminBase, Outcome
from kctl.client.admin.results import DeleteRecordsResult, OffsetResult
from kctl.client.cluster import Deadline
from kctl.client.types import TopicPartition
from kctl.protocol import ApiKey
from kctl.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kctl.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
OFFSET_SPECS: dict[str, int] = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}
"""The named ``list_offsets`` specs and the timestamps Kafka's ListOffsets uses for them."""

OffsetSpec = str | int
"""``"earliest"``, ``"latest"``, ``"max-timestamp"`` or a timestamp in ms (first offset at or after it)."""



def _offset_timestamp(spec: OffsetSpec) -> int:
    if isinstance(spec, bool):
        raise ValueError(f"bad offset spec {spec!r}")
    if isinstance(spec, int):
        if spec < 0 and spec not in (EARLIEST, LATEST, MAX_TIMESTAMP):
            raise ValueError(f"bad offset spec {spec}: a timestamp in ms, or earliest/latest/max-timestamp")
        return spec
    text = str(spec).strip().lower()
    if text in OFFSET_SPECS:
        return OFFSET_SPECS[text]
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"bad offset spec {spec!r}: expected earliest, latest, max-timestamp or a timestamp in ms"
        ) from None
    return _offset_timestamp(value)



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
        A mapping gives each partition its own spec. ``isolation_level`` 1 is READ_COMMITTED."""
        if isinstance(topic_partitions, Mapping):
            specs = {TopicPartition(*tp): _offset_timestamp(s) for tp, s in topic_partitions.items()}
        else:
            timestamp = _offset_timestamp(spec)
            specs = {TopicPartition(*tp): timestamp for tp in topic_partitions}
        if not specs:
            return {}
        deadline = self._deadline(timeout)
        min_version = 7 if MAX_TIMESTAMP in specs.values() else (2 if isolation_level else None)

        def build(group: dict[TopicPartition, int], version: int, deadline: Deadline) -> ListOffsetsRequest:
            by_topic: dict[str, list[ListOffsetsPartition]] = {}
            for tp, ts in group.items():
                by_topic.setdefault(tp.topic, []).append(
                    ListOffsetsPartition(partition_index=tp.partition, timestamp=ts, max_num_offsets=1)
                )
            return ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            )

        def parse(response: Any) -> dict[TopicPartition, Outcome]:
            out: dict[TopicPartition, Outcome] = {}
            for t in response.topics:
                for p in t.partitions:
                    offset, ts = p.offset, p.timestamp
                    if p.old_style_offsets:  # v0
                        offset, ts = p.old_style_offsets[0], -1
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = Outcome(p.error_code, None, OffsetResult(tp, offset, ts, p.leader_epoch))
            return out

        outcomes = self._per_leader(
            specs, ApiKey.LIST_OFFSETS, build, parse, deadline, min_version=min_version
        )
        results = {}
        for tp in specs:
            outcome = outcomes[tp]
            if outcome.error_code or outcome.payload is None:
                results[tp] = OffsetResult(
                    tp, error_code=outcome.error_code, error_message=outcome.error_message
                )
            else:
                results[tp] = outcome.payload
        return results

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

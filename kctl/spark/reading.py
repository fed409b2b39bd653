"""Reading one ``OffsetRange`` (one Spark task) with a ``kctl.client.Consumer``: exactly the records
``[from_offset, until_offset)`` of one partition, in chunks, and what happens when some are gone.

Offsets missing inside the range because compaction removed their records are simply not there
(the consumer's position moves past them). Records that the range needs but the log no longer has
— deleted by retention or ``DeleteRecords`` below the log start, or a log end (high watermark) now
below the range's end — are *data loss*: with ``failOnDataLoss`` (the default) the task fails with
``DataLossError``; without it a warning is logged and the records still there are read, as Spark's
Kafka source does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from kctl.client import Consumer, ConsumerRecord, KafkaTimeoutError, OffsetOutOfRangeError
from kctl.spark.options import SourceOptions
from kctl.spark.planning import OffsetRange, consumer_config

__all__ = ["CHUNK_RECORDS", "DataLossError", "read_range"]

log = logging.getLogger(__name__)

CHUNK_RECORDS = 8192
"""Records per chunk handed to Spark (one Arrow record batch)."""


class DataLossError(RuntimeError):
    """Records a range needs are no longer in the log (and ``failOnDataLoss`` is true)."""


def _lost(options: SourceOptions, message: str) -> None:
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost (retention, DeleteRecords or truncation); "
            "set failOnDataLoss=false to read what is left instead of failing"
        )
    log.warning("%s; some data may have been lost, going on (failOnDataLoss=false)", message)


def read_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[list[ConsumerRecord]]:
    """The records of ``offset_range`` in offset order, in chunks of at most ``CHUNK_RECORDS``."""
    tp = offset_range.topic_partition
    until = offset_range.until_offset
    config = consumer_config(options, max_poll_records=CHUNK_RECORDS)
    with Consumer(options.bootstrap_servers, config) as consumer:
        start = offset_range.from_offset
        log_start = consumer.beginning_offsets([tp])[tp]
        if log_start > start:
            _lost(options, f"{tp}: offsets {start}..{min(log_start, until) - 1} are below the log start")
            start = log_start
        log_end = consumer.end_offsets([tp])[tp]
        if log_end < until:
            _lost(options, f"{tp}: the log ends at {log_end}, before the range's end {until}")
            until = log_end
        if start >= until:
            return
        consumer.assign([tp])
        consumer.seek(tp, start)
        timeout = options.poll_timeout_ms / 1000.0
        idle_since = time.monotonic()
        while True:
            try:
                records = consumer.poll(min(timeout, 1.0))
            except OffsetOutOfRangeError:
                log_start, log_end = (
                    consumer.beginning_offsets([tp])[tp],
                    consumer.end_offsets([tp])[tp],
                )
                position = _out_of_range_position(options, tp, start, log_start, log_end, until)
                if position is None:
                    return
                consumer.seek(tp, position)
                start = position
                continue
            if records:
                idle_since = time.monotonic()
                last = records[-1].offset
                if last >= until:
                    chunk = [r for r in records if r.offset < until]
                    if chunk:
                        yield chunk
                    return
                yield records
                start = last + 1
            if consumer.position(tp) >= until:
                return
            if time.monotonic() - idle_since > timeout:
                raise KafkaTimeoutError(
                    f"{tp}: no records for {timeout:.0f}s at offset {consumer.position(tp)} "
                    f"(reading up to {until}; kafkaConsumer.pollTimeoutMs)"
                )


def _out_of_range_position(
    options: SourceOptions, tp: object, start: int, log_start: int, log_end: int, until: int
) -> int | None:
    """Where to go on after OFFSET_OUT_OF_RANGE at ``start``: the log start (records deleted under the
    reader), or nowhere (None) when the log now ends before ``start``."""
    if start < log_start:
        _lost(options, f"{tp}: offsets {start}..{min(log_start, until) - 1} were deleted while reading")
        return log_start if log_start < until else None
    _lost(options, f"{tp}: the log ends at {log_end}, before offset {start} of the range")
    return None

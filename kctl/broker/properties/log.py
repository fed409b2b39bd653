"""The log: segments, retention, flushing, compaction, indexes, timestamps, compression (the
defaults of the topic configs, each one's first synonym)."""

from __future__ import annotations

from kctl.broker.properties.key import HIGH, HOUR_MS, broker_key
from kctl.common.config_def import LONG_MAX, OneOf, Range, Synonym
from kctl.common.config_def import ConfigType as T
from kctl.log.config import COMPRESSION_TYPES

LOG_CONFIGS = [
    broker_key(
        "log.segment.bytes",
        T.INT,
        1073741824,
        Range(14),
        "Segment size at which a new segment is rolled.",
        importance=HIGH,
    ),
    broker_key(
        "log.roll.ms",
        T.LONG,
        None,
        Range(1),
        "Segment age at which a new segment is rolled (default: log.roll.hours).",
        Synonym("log.roll.hours", HOUR_MS),
    ),
    broker_key(
        "log.roll.hours", T.INT, 168, Range(1), "Segment age in hours at which a new segment is rolled."
    ),
    broker_key(
        "log.retention.ms",
        T.LONG,
        None,
        Range(-1),
        "Age after which segments are deleted; -1: forever (default: log.retention.minutes, "
        "then log.retention.hours).",
        Synonym("log.retention.minutes", 60_000),
        Synonym("log.retention.hours", HOUR_MS),
        importance=HIGH,
    ),
    broker_key("log.retention.minutes", T.INT, None, Range(-1), "log.retention.ms in minutes."),
    broker_key("log.retention.hours", T.INT, 168, Range(-1), "log.retention.ms in hours.", importance=HIGH),
    broker_key(
        "log.retention.bytes",
        T.LONG,
        -1,
        Range(-1),
        "Size per partition above which the oldest segments are deleted.",
        importance=HIGH,
    ),
    broker_key("log.retention.check.interval.ms", T.LONG, 300000, Range(1), "How often retention runs."),
    broker_key(
        "log.flush.interval.messages",
        T.LONG,
        LONG_MAX,
        Range(1),
        "Records appended before a partition is fsynced.",
        importance=HIGH,
    ),
    broker_key(
        "log.flush.interval.ms",
        T.LONG,
        None,
        Range(0),
        "Time after which unflushed records are fsynced (default: never).",
        importance=HIGH,
    ),
    broker_key(
        "log.flush.scheduler.interval.ms",
        T.LONG,
        1000,
        Range(1),
        "How often the flush.ms policy is checked.",
    ),
    broker_key(
        "log.flush.offset.checkpoint.interval.ms",
        T.INT,
        60000,
        Range(1),
        "How often recovery points are checkpointed.",
    ),
    broker_key("log.cleanup.policy", T.LIST, "delete", None, "delete, compact or compact,delete."),
    broker_key("log.cleaner.enable", T.BOOLEAN, True, None, "Run compaction for compacted topics."),
    broker_key(
        "log.cleaner.threads",
        T.INT,
        1,
        Range(0),
        "Threads compacting logs (kctl compacts with one task whatever the value).",
    ),
    broker_key(
        "log.cleaner.max.compaction.lag.ms",
        T.LONG,
        LONG_MAX,
        Range(1),
        "Longest time a record stays ineligible for compaction (kctl: no effect).",
    ),
    broker_key("log.cleaner.backoff.ms", T.LONG, 15000, Range(0), "Pause between compaction passes."),
    broker_key(
        "log.cleaner.delete.retention.ms", T.LONG, 86400000, Range(0), "How long tombstones are kept."
    ),
    broker_key(
        "log.cleaner.min.cleanable.ratio",
        T.DOUBLE,
        0.5,
        Range(0, 1),
        "Dirty ratio at which a log is compacted.",
    ),
    broker_key(
        "log.cleaner.min.compaction.lag.ms",
        T.LONG,
        0,
        Range(0),
        "Minimum age of records before compaction.",
    ),
    broker_key("log.index.interval.bytes", T.INT, 4096, Range(0), "Bytes between offset index entries."),
    broker_key("log.index.size.max.bytes", T.INT, 10485760, Range(4), "Maximum index size per segment."),
    broker_key(
        "log.message.timestamp.type",
        T.STRING,
        "CreateTime",
        OneOf(("CreateTime", "LogAppendTime")),
        "CreateTime or LogAppendTime.",
    ),
    broker_key(
        "log.segment.delete.delay.ms",
        T.LONG,
        60000,
        Range(0),
        "Delay before a deleted segment's files go.",
    ),
    broker_key("log.preallocate", T.BOOLEAN, False, None, "Preallocate segment files."),
    broker_key(
        "log.roll.jitter.ms",
        T.LONG,
        None,
        Range(0),
        "Largest random jitter subtracted from the roll time (kctl: no effect).",
        Synonym("log.roll.jitter.hours", HOUR_MS),
    ),
    broker_key("log.roll.jitter.hours", T.INT, 0, Range(0), "log.roll.jitter.ms in hours."),
    broker_key(
        "compression.type",
        T.STRING,
        "producer",
        OneOf(COMPRESSION_TYPES),
        "Default codec of topics' batches ('producer': the producer's; else the broker re-compresses).",
        importance=HIGH,
    ),
    broker_key("compression.gzip.level", T.INT, -1, Range(-1, 9), "gzip level of re-compressed batches."),
    broker_key("compression.lz4.level", T.INT, 9, Range(1, 17), "lz4 level of re-compressed batches."),
    broker_key(
        "compression.zstd.level", T.INT, 3, Range(-131072, 22), "zstd level of re-compressed batches."
    ),
    broker_key(
        "log.message.timestamp.before.max.ms",
        T.LONG,
        LONG_MAX,
        Range(0),
        "Default of message.timestamp.before.max.ms.",
    ),
    broker_key(
        "log.message.timestamp.after.max.ms",
        T.LONG,
        LONG_MAX,
        Range(0),
        "Default of message.timestamp.after.max.ms.",
    ),
    broker_key(
        "log.message.timestamp.difference.max.ms",
        T.LONG,
        LONG_MAX,
        Range(0),
        "Deprecated default of message.timestamp.difference.max.ms.",
    ),
    broker_key(
        "log.message.downconversion.enable",
        T.BOOLEAN,
        True,
        None,
        "Default of message.downconversion.enable (kctl: no effect).",
    ),
    broker_key(
        "log.message.format.version",
        T.STRING,
        "3.0-IV1",
        None,
        "Deprecated default of message.format.version (kctl: no effect).",
    ),
    broker_key(
        "log.local.retention.ms",
        T.LONG,
        -2,
        Range(-2),
        "Tiered storage local retention (kctl: no effect).",
    ),
    broker_key(
        "log.local.retention.bytes",
        T.LONG,
        -2,
        Range(-2),
        "Tiered storage local retention size (kctl: no effect).",
    ),
]

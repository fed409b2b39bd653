"""Limits of the broker's work: decompressed batch size, the client quotas' measuring window."""

from __future__ import annotations

from kctl.broker.properties.key import LOW, broker_key
from kctl.common.config_def import ConfigType as T
from kctl.common.config_def import Range

LIMIT_CONFIGS = [
    broker_key(
        "max.decompressed.batch.bytes",
        T.INT,
        268435456,
        Range(1),
        "kctl: largest decompressed batch the broker will read (compaction).",
        importance=LOW,
    ),
    broker_key(
        "quota.window.num",
        T.INT,
        11,
        Range(1),
        "The number of samples client quotas measure byte rates over.",
        importance=LOW,
    ),
    broker_key(
        "quota.window.size.seconds",
        T.INT,
        1,
        Range(1),
        "The time span of each sample of the client quotas' byte rates.",
        importance=LOW,
    ),
]

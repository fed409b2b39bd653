"""Consumer groups and their offsets (__consumer_offsets), and idempotent producers' expiry."""

from __future__ import annotations

from kctl.broker.properties.key import HIGH, LOW, broker_key
from kctl.common.config_def import ConfigType as T
from kctl.common.config_def import Range

GROUP_CONFIGS = [
    broker_key("offsets.topic.num.partitions", T.INT, 50, Range(1), "Partitions of __consumer_offsets."),
    broker_key(
        "offsets.retention.minutes",
        T.INT,
        10080,
        Range(1),
        "How long committed offsets of empty groups are kept.",
        importance=HIGH,
    ),
    broker_key(
        "group.initial.rebalance.delay.ms",
        T.INT,
        3000,
        Range(0),
        "Delay of a new group's first rebalance.",
    ),
    broker_key(
        "group.min.session.timeout.ms",
        T.INT,
        6000,
        Range(1),
        "Smallest session timeout a member may use.",
    ),
    broker_key(
        "group.max.session.timeout.ms",
        T.INT,
        1800000,
        Range(1),
        "Largest session timeout a member may use.",
    ),
    broker_key("group.max.size", T.INT, 2147483647, Range(1), "Most members a group may have."),
    broker_key("offset.metadata.max.bytes", T.INT, 4096, Range(0), "Largest metadata of a committed offset."),
    broker_key(
        "offsets.topic.replication.factor",
        T.INT,
        3,
        Range(1),
        "Replication factor of __consumer_offsets (embedded mode: 1; a cluster refuses to create "
        "it, COORDINATOR_NOT_AVAILABLE, until that many brokers are up).",
        importance=HIGH,
    ),
    broker_key(
        "offsets.retention.check.interval.ms",
        T.LONG,
        600000,
        Range(1),
        "How often expired offsets are removed.",
    ),
    broker_key(
        "producer.id.expiration.ms",
        T.INT,
        86400000,
        Range(1),
        "How long a partition remembers an idempotent producer after its last batch's timestamp.",
        importance=LOW,
    ),
    broker_key(
        "producer.id.expiration.check.interval.ms",
        T.INT,
        600000,
        Range(1),
        "How often partitions forget expired idempotent producers.",
        importance=LOW,
    ),
]

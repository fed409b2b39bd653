"""How a broker property is defined: :func:`broker_key` builds its ConfigKey, with the dynamic update
mode Kafka gives it (``PER_BROKER_CONFIGS``, ``CLUSTER_WIDE_CONFIGS``; read-only otherwise)."""

from __future__ import annotations

from typing import Any

from kctl.broker.security.config import DYNAMIC_SECURITY_CONFIGS, KERBEROS_CONFIGS
from kctl.common.config_def import ConfigKey, Dynamic, Importance, Synonym, Validator
from kctl.common.config_def import ConfigType as T

HOUR_MS = 60 * 60 * 1000
HIGH = Importance.HIGH
LOW = Importance.LOW


def broker_key(
    name: str,
    config_type: T,
    default: Any,
    validator: Validator | None,
    doc: str,
    *synonyms: Synonym,
    importance: Importance = Importance.MEDIUM,
    applied: bool = True,
) -> ConfigKey:
    """A broker property; its dynamic update mode is Kafka's (``PER_BROKER_CONFIGS``,
    ``CLUSTER_WIDE_CONFIGS``; read-only otherwise). ``applied=False``: accepted, stored and
    described for compatibility, not acted on."""
    if name in PER_BROKER_CONFIGS:
        dynamic = Dynamic.PER_BROKER
    elif name in CLUSTER_WIDE_CONFIGS:
        dynamic = Dynamic.CLUSTER_WIDE
    else:
        dynamic = Dynamic.READ_ONLY
    return ConfigKey(
        name, config_type, default, validator, doc, importance, dynamic, synonyms, applied=applied
    )


#: Broker configs Kafka lets AlterConfigs change for one broker only (resource name = its id).
PER_BROKER_CONFIGS = (
    frozenset({"listeners", "advertised.listeners"}) | DYNAMIC_SECURITY_CONFIGS | KERBEROS_CONFIGS
)

#: Broker configs Kafka lets AlterConfigs change cluster-wide (resource name "") or per broker: the
#: log defaults (the topic configs' broker synonyms), the cleaner's, the replication throttle rates.
CLUSTER_WIDE_CONFIGS = frozenset(
    {
        "message.max.bytes",
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.hours",
        "log.roll.jitter.ms",
        "log.roll.jitter.hours",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.preallocate",
        "log.message.timestamp.type",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.difference.max.ms",
        "log.message.downconversion.enable",
        "log.local.retention.ms",
        "log.local.retention.bytes",
        "log.cleaner.threads",
        "log.cleaner.backoff.ms",
        "producer.id.expiration.ms",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "background.threads",
        "num.io.threads",
        "num.network.threads",
        "num.replica.fetchers",
    }
)

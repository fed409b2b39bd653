"""The transaction coordinator's broker properties, under Kafka's names (one ConfigKey each; part of
BROKER_CONFIGS): the ``__transaction_state`` topic, the timeouts a producer may ask for, and the
periodic abort of timed-out transactions and removal of expired transactional ids
(kctl.broker.transaction)."""

from __future__ import annotations

from kctl.common.config_def import ConfigKey, Dynamic, Importance, Range
from kctl.common.config_def import ConfigType as T


def _key(name: str, config_type: T, default: int, low: int, doc: str, importance: Importance) -> ConfigKey:
    return ConfigKey(name, config_type, default, Range(low), doc, importance, Dynamic.READ_ONLY, ())


TRANSACTION_CONFIGS = [
    ConfigKey(
        "transaction.partition.verification.enable",
        T.BOOLEAN,
        True,
        None,
        "KIP-890 part 1: a partition's leader asks the coordinator before appending a transactional batch "
        "that opens a transaction there, and refuses it (INVALID_TXN_STATE) when the partition is not in "
        "the producer's transaction, so a late or stray write cannot leave a hanging transaction.",
        Importance.LOW,
        Dynamic.READ_ONLY,
        (),
    ),
    _key(
        "transaction.state.log.num.partitions",
        T.INT,
        50,
        1,
        "Partitions of __transaction_state: a transactional id's coordinator is the leader of partition "
        "abs(hash(id)) % this.",
        Importance.HIGH,
    ),
    _key(
        "transaction.state.log.replication.factor",
        T.INT,
        3,
        1,
        "Replication factor of __transaction_state (embedded mode: 1; a cluster refuses to create it, "
        "COORDINATOR_NOT_AVAILABLE, until that many brokers are up).",
        Importance.HIGH,
    ),
    _key(
        "transaction.state.log.min.isr",
        T.INT,
        2,
        1,
        "min.insync.replicas of __transaction_state (at most its replication factor).",
        Importance.HIGH,
    ),
    _key(
        "transaction.state.log.segment.bytes",
        T.INT,
        104857600,
        1,
        "Segment size of __transaction_state.",
        Importance.HIGH,
    ),
    _key(
        "transaction.max.timeout.ms",
        T.INT,
        900000,
        1,
        "The largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above).",
        Importance.HIGH,
    ),
    _key(
        "transactional.id.expiration.ms",
        T.INT,
        604800000,
        1,
        "A transactional id with no transaction in progress and no update for this long is removed "
        "(a tombstone in __transaction_state).",
        Importance.HIGH,
    ),
    _key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        T.INT,
        10000,
        1,
        "How often the coordinator aborts the transactions open longer than their timeout (bumping the "
        "producer's epoch, which fences it).",
        Importance.LOW,
    ),
    _key(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        T.INT,
        3600000,
        1,
        "How often the coordinator removes expired transactional ids.",
        Importance.LOW,
    ),
]

"""Replication: the throttle rates of reassignments and log dir moves, the ISR, the followers' fetching."""

from __future__ import annotations

from kctl.broker.properties.key import HIGH, broker_key
from kctl.broker.replica_selector import RACK_AWARE_SELECTOR, selector_class_name
from kctl.common.config_def import LONG_MAX, Custom, Range
from kctl.common.config_def import ConfigType as T

REPLICATION_THROTTLE_CONFIGS = [
    broker_key(
        "leader.replication.throttled.rate",
        T.LONG,
        LONG_MAX,
        Range(0),
        "Bytes/s this broker sends to followers of the replicas listed in their topics' "
        "leader.replication.throttled.replicas.",
    ),
    broker_key(
        "follower.replication.throttled.rate",
        T.LONG,
        LONG_MAX,
        Range(0),
        "Bytes/s this broker fetches, as a follower, for the replicas listed in their topics' "
        "follower.replication.throttled.replicas.",
    ),
    broker_key(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        T.LONG,
        LONG_MAX,
        Range(0),
        "Bytes/s a move between this broker's log dirs may copy (AlterReplicaLogDirs). kctl: accepted, "
        "stored and described (Kafka's tools set and clear it around a reassignment); moves are not "
        "throttled.",
    ),
]

REPLICATION_CONFIGS = [
    broker_key(
        "min.insync.replicas",
        T.INT,
        1,
        Range(1),
        "Fewest in-sync replicas for an acks=all produce (topic: min.insync.replicas).",
        importance=HIGH,
    ),
    broker_key(
        "replica.lag.time.max.ms",
        T.LONG,
        30000,
        Range(1),
        "A follower not caught up to the leader's log end for this long leaves the ISR.",
        importance=HIGH,
    ),
    broker_key("replica.fetch.wait.max.ms", T.INT, 500, Range(0), "Longest wait of a follower's fetch."),
    broker_key(
        "replica.socket.timeout.ms",
        T.INT,
        30000,
        Range(1),
        "How long a follower waits for the answer to a fetch (at least replica.fetch.wait.max.ms) "
        "before it drops the connection and connects again: how soon it comes back after a network "
        "cut heals instead of waiting for TCP's retransmissions.",
    ),
    broker_key("replica.fetch.min.bytes", T.INT, 1, Range(1), "Bytes a follower's fetch waits for."),
    broker_key(
        "replica.fetch.max.bytes", T.INT, 1048576, Range(0), "Bytes a follower fetches per partition."
    ),
    broker_key(
        "replica.fetch.response.max.bytes",
        T.INT,
        10485760,
        Range(0),
        "Bytes a follower's whole fetch response may hold.",
    ),
    broker_key("replica.fetch.backoff.ms", T.INT, 1000, Range(0), "A follower's pause after a failed fetch."),
    broker_key(
        "inter.broker.listener.name",
        T.STRING,
        None,
        None,
        "Listener followers fetch from (default: the first advertised listener).",
    ),
    broker_key(
        "replica.selector.class",
        T.CLASS,
        None,
        Custom(selector_class_name, f"null, {RACK_AWARE_SELECTOR} (alias rack-aware)"),
        "The selector a leader asks which replica a consumer (Fetch v11+, which sends its client.rack) "
        "should fetch from (KIP-392): the rack-aware one names an in-sync follower in the consumer's "
        "rack when the leader is not there. Unset: consumers fetch from the leader. Followers serve "
        "consumers' fetches up to their high watermark either way.",
    ),
    broker_key(
        "replica.high.watermark.checkpoint.interval.ms",
        T.LONG,
        5000,
        Range(1),
        "How often high watermarks are written to replication-offset-checkpoint.",
    ),
]

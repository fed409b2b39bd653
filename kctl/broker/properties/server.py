"""The server: identity, listeners, topic creation, leadership and shutdown, request and
connection limits, ZooKeeper."""

from __future__ import annotations

from kctl.broker.metrics.listener import MetricsListener
from kctl.broker.properties.key import HIGH, broker_key
from kctl.common.config_def import ConfigType as T
from kctl.common.config_def import Range, Synonym

#: The network's resource limits (kctl.broker.connection_limits; Kafka's names and defaults, except
#: queued.max.request.bytes: Kafka's -1 is unbounded, kctl's default bounds it)
NETWORK_LIMIT_CONFIGS = [
    broker_key(
        "queued.max.request.bytes",
        T.LONG,
        536870912,
        None,
        "Bytes of requests received but not yet handled, all connections together; reading pauses "
        "above it (-1: no bound). kctl's default is 512 MiB (Kafka's: -1).",
    ),
    broker_key(
        "connections.max.idle.ms",
        T.LONG,
        600000,
        None,
        "Close a connection that sent and received nothing for this long (-1: never).",
    ),
    broker_key(
        "max.connections", T.INT, 2147483647, Range(0), "Connections accepted, all listeners together."
    ),
    broker_key(
        "max.connections.per.ip", T.INT, 2147483647, Range(0), "Connections accepted from one address."
    ),
    broker_key(
        "fetch.wait.max.ms",
        T.INT,
        60000,
        Range(0),
        "kctl: the longest a Fetch is parked waiting for min_bytes (a longer max_wait_ms is capped).",
    ),
    broker_key(
        "max.incremental.fetch.session.cache.slots",
        T.INT,
        1000,
        Range(0),
        "Incremental fetch sessions (KIP-227) the broker keeps at most.",
    ),
]

_NO_THREAD_POOL = "(Accepted, stored and described for compatibility; no effect in kctl, one event loop.)"

#: Kafka's thread-pool sizes, dynamic cluster-wide in Kafka (DynamicThreadPool); kctl's broker is one
#: asyncio event loop, so they are accepted, stored and described without effect
THREAD_POOL_CONFIGS = [
    broker_key(name, T.INT, default, Range(1), f"{doc} {_NO_THREAD_POOL}", applied=False)
    for name, default, doc in (
        ("background.threads", 10, "Threads for background processing."),
        ("num.io.threads", 8, "Threads processing requests."),
        ("num.network.threads", 3, "Threads receiving requests and sending responses."),
        ("num.replica.fetchers", 1, "Fetcher threads replicating from each source broker."),
    )
]

SERVER_CONFIGS = [
    *THREAD_POOL_CONFIGS,
    broker_key("broker.id", T.INT, 0, Range(0), "This broker's id in the cluster.", importance=HIGH),
    broker_key(
        "listeners",
        T.STRING,
        "PLAINTEXT://127.0.0.1:9092",
        None,
        "Addresses to listen on: NAME://HOST:PORT, comma-separated.",
        importance=HIGH,
    ),
    broker_key(
        "advertised.listeners",
        T.STRING,
        None,
        None,
        "Addresses given to clients (default: listeners).",
        importance=HIGH,
    ),
    broker_key(
        "metrics.listener",
        T.STRING,
        "",
        MetricsListener(),
        "kctl: serve Prometheus metrics at http://HOST:PORT/metrics (port 0: a free one); empty: off.",
    ),
    broker_key(
        "log.dirs",
        T.STRING,
        None,
        None,
        "Comma-separated data directories (default: log.dir).",
        importance=HIGH,
    ),
    broker_key("log.dir", T.STRING, "./data", None, "The data directory when log.dirs is not set."),
    broker_key(
        "num.partitions",
        T.INT,
        1,
        Range(1),
        "Partitions of auto-created topics and of topics created without a count.",
    ),
    broker_key(
        "default.replication.factor", T.INT, 1, Range(1), "Replication factor of auto-created topics."
    ),
    broker_key(
        "auto.create.topics.enable",
        T.BOOLEAN,
        True,
        None,
        "Create a topic on first produce or metadata request.",
        importance=HIGH,
    ),
    broker_key("delete.topic.enable", T.BOOLEAN, True, None, "Allow DeleteTopics.", importance=HIGH),
    broker_key("broker.rack", T.STRING, None, None, "This broker's rack, for rack-aware replica placement."),
    broker_key(
        "unclean.leader.election.enable",
        T.BOOLEAN,
        False,
        None,
        "Elect a replica outside the ISR when no ISR member is alive (may lose data).",
        importance=HIGH,
    ),
    broker_key(
        "auto.leader.rebalance.enable",
        T.BOOLEAN,
        True,
        None,
        "The controller moves leadership back to preferred replicas when imbalanced.",
        importance=HIGH,
    ),
    broker_key(
        "leader.imbalance.check.interval.seconds",
        T.LONG,
        300,
        Range(1),
        "How often the controller checks the leader imbalance.",
    ),
    broker_key(
        "leader.imbalance.per.broker.percentage",
        T.INT,
        10,
        Range(0),
        "Leader imbalance per broker (percent) above which the controller rebalances.",
    ),
    broker_key(
        "controlled.shutdown.enable",
        T.BOOLEAN,
        True,
        None,
        "On SIGTERM, ask the controller to move leadership off this broker before stopping.",
    ),
    broker_key(
        "controlled.shutdown.max.retries", T.INT, 3, Range(0), "Controlled shutdown attempts to make."
    ),
    broker_key(
        "controlled.shutdown.retry.backoff.ms",
        T.LONG,
        5000,
        Range(0),
        "Wait between controlled shutdown attempts.",
    ),
    broker_key(
        "message.max.bytes",
        T.INT,
        1048588,
        Range(0),
        "Largest record batch accepted (topic: max.message.bytes).",
        importance=HIGH,
    ),
    broker_key("socket.request.max.bytes", T.INT, 104857600, Range(1), "Largest request frame accepted."),
    *NETWORK_LIMIT_CONFIGS,
    broker_key(
        "zookeeper.connect",
        T.STRING,
        None,
        None,
        "ZooKeeper connection string host:port[,host:port][/chroot]; empty: embedded.",
        importance=HIGH,
    ),
    broker_key("zookeeper.session.timeout.ms", T.INT, 18000, Range(1), "ZooKeeper session timeout."),
    broker_key(
        "zookeeper.connection.timeout.ms",
        T.INT,
        None,
        Range(1),
        "ZooKeeper connection timeout (default: the session timeout).",
        Synonym("zookeeper.session.timeout.ms"),
    ),
]

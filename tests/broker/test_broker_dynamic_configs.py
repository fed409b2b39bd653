"""Dynamic broker configs as Kafka has them: DescribeConfigs of a BROKER resource gives every config
with its value, source and read-only flag (sensitive values hidden); IncrementalAlterConfigs and
AlterConfigs on a broker (resource name = its id) and on the cluster-wide default (name "") are
stored in the registry — the embedded one and ZooKeeper's /config/brokers/<id|<default>> with a
change notification — and applied without a restart; read-only configs are refused with Kafka's
error. `kctl broker config describe|alter` on top."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kazoo.client import KazooClient

from kctl.testing import BrokerProcess

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def kctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=60)


def describe_broker(admin: AdminClient, name: str) -> dict[str, Any]:
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, name)]).values()
    return dict(future.result(15))


def alter_broker(admin: AdminClient, name: str, **ops: Any) -> None:
    """IncrementalAlterConfigs (SET, or DELETE for None) on broker ``name``; confluent-kafka for a
    broker id, kctl's admin client for the cluster-wide default (confluent-kafka and kafka-python
    refuse the resource name "")."""
    configs = {key.replace("_", "."): None if value is None else str(value) for key, value in ops.items()}
    if name:
        entries = [
            ConfigEntry(
                key,
                value,
                incremental_operation=AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET,
            )
            for key, value in configs.items()
        ]
        resource = ConfigResource(ConfigResource.Type.BROKER, name, incremental_configs=entries)
        [future] = admin.incremental_alter_configs([resource]).values()
        future.result(15)
        return
    from kctl.client import AdminClient as KctlAdmin

    with KctlAdmin(admin.bootstrap) as client:  # type: ignore[attr-defined]
        result = client.alter_broker_configs(
            None,
            {k: v for k, v in configs.items() if v is not None},
            [k for k, v in configs.items() if v is None],
        )
    if not result.ok:
        raise KafkaException(f"{result.error}: {result.error_message}")


def describe_default(admin: AdminClient) -> dict[str, Any]:
    """The cluster-wide default resource (""): name -> entry (kctl's admin client; confluent-kafka
    and kafka-python refuse the name "")."""
    from kctl.client import AdminClient as KctlAdmin

    with KctlAdmin(admin.bootstrap) as client:  # type: ignore[attr-defined]
        return {e.name: e for e in client.describe_broker_configs(None)}


def produce_gzip(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "gzip", "linger.ms": 20})
    for i in range(count):
        producer.produce(topic, b"value %d" % i * 20, b"k%d" % i)
    assert producer.flush(30) == 0


def codecs(partition_dir: Path) -> set[str]:
    dump = kctl("log", "dump", str(partition_dir), "-f", "jsonl")
    assert dump.returncode == 0, dump.stderr
    rows = [json.loads(line) for line in dump.stdout.splitlines() if line.strip()]
    return {row["compression"] for row in rows if row.get("type") == "batch"}


@pytest.fixture(scope="module")
def embedded(module_broker_factory: Any) -> BrokerProcess:
    return module_broker_factory({"log.retention.hours": "100", "log.cleaner.backoff.ms": "15000"})


@pytest.fixture(scope="module")
def admin(embedded: BrokerProcess) -> AdminClient:
    return _admin(str(embedded.bootstrap))


def _admin(bootstrap: str) -> AdminClient:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.bootstrap = bootstrap  # type: ignore[attr-defined]
    return client


def test_describe_broker_sources_read_only_and_sensitive(admin: AdminClient, embedded: BrokerProcess) -> None:
    configs = describe_broker(admin, "0")
    assert configs["log.retention.hours"].value == "100"
    assert configs["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["num.partitions"].is_read_only
    assert not configs["log.retention.ms"].is_read_only  # cluster-wide dynamic, as in Kafka
    assert not configs["advertised.listeners"].is_read_only  # per-broker dynamic
    assert configs["broker.id"].is_read_only and configs["zookeeper.connect"].is_read_only
    assert configs["listeners"].value is not None
    assert configs["ssl.key.password"].is_sensitive and configs["ssl.key.password"].value is None


def test_read_only_and_per_broker_configs_are_refused(admin: AdminClient) -> None:
    with pytest.raises(KafkaException) as raised:
        alter_broker(admin, "0", num_partitions=3)
    assert raised.value.args[0].name() == "INVALID_REQUEST"
    assert "Cannot update these configs dynamically" in raised.value.args[0].str()
    at_default = kctl(
        "broker",
        "config",
        "alter",
        "-b",
        admin.bootstrap,  # type: ignore[attr-defined]
        "--default",
        "--set",
        "listeners=PLAINTEXT://127.0.0.1:1",
    )
    assert at_default.returncode == 1, at_default.stderr
    assert "INVALID_REQUEST" in at_default.stderr and "broker id must be specified" in at_default.stderr
    with pytest.raises(KafkaException) as raised:
        alter_broker(admin, "0", log_retention_ms="soon")
    assert raised.value.args[0].name() == "INVALID_REQUEST"
    assert describe_broker(admin, "0")["num.partitions"].value == "1"


def test_cluster_default_applied_without_restart_and_persisted(
    admin: AdminClient, embedded: BrokerProcess
) -> None:
    bootstrap = str(embedded.bootstrap)
    topic = f"dyn-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    produce_gzip(bootstrap, topic, 20)
    assert codecs(embedded.data_dir / f"{topic}_0") == {"gzip"}

    alter_broker(admin, "", compression_type="zstd", log_retention_ms=3_600_000)
    default = describe_default(admin)
    assert default["compression.type"].value == "zstd"
    assert default["compression.type"].source.name == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert "num.partitions" not in default  # the default resource lists only the dynamic defaults
    configs = describe_broker(admin, "0")
    assert configs["compression.type"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    # a dynamic log.retention.ms hides the static log.retention.hours (Kafka's synonym order)
    assert configs["log.retention.ms"].value == "3600000"
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    assert future.result(15)["retention.ms"].value == "3600000"

    produce_gzip(bootstrap, topic, 20)  # the topic has no override: the new default applies at once
    assert codecs(embedded.data_dir / f"{topic}_0") == {"gzip", "zstd"}

    alter_broker(admin, "0", compression_type="lz4")  # this broker's config beats the default
    configs = describe_broker(admin, "0")
    assert configs["compression.type"].value == "lz4"
    assert configs["compression.type"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    from kctl.client import AdminClient as KctlAdmin

    with KctlAdmin(str(embedded.bootstrap)) as client:  # confluent-kafka folds synonyms by name
        [entry] = [e for e in client.describe_broker_configs(0) if e.name == "compression.type"]
    assert [(s.value, s.source.name) for s in entry.synonyms] == [
        ("lz4", "DYNAMIC_BROKER_CONFIG"),
        ("zstd", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("producer", "DEFAULT_CONFIG"),
    ]

    embedded.restart()  # stored in the registry: still in effect after a restart
    admin_again = _admin(str(embedded.bootstrap))
    configs = describe_broker(admin_again, "0")
    assert configs["compression.type"].value == "lz4"
    alter_broker(admin_again, "0", compression_type=None)
    alter_broker(admin_again, "", compression_type=None, log_retention_ms=None)
    configs = describe_broker(admin_again, "0")
    assert configs["compression.type"].value == "producer"
    assert configs["compression.type"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    [future] = admin_again.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    assert future.result(15)["retention.ms"].value == str(100 * 3_600_000)  # log.retention.hours again


def test_kctl_broker_config_alter_plans_then_executes(embedded: BrokerProcess, admin: AdminClient) -> None:
    bootstrap = str(embedded.bootstrap)
    planned = kctl(
        "broker", "config", "alter", "-b", bootstrap, "--broker", "0", "--set", "log.cleaner.backoff.ms=500"
    )
    assert planned.returncode == 0, planned.stderr
    assert "add --execute" in planned.stderr
    stored = describe_broker(admin, "0")["log.cleaner.backoff.ms"]
    assert stored.source == ConfigSource.STATIC_BROKER_CONFIG.value  # nothing stored without --execute

    executed = kctl(
        "broker", "config", "alter", "-b", bootstrap, "--broker", "0",
        "--set", "log.cleaner.backoff.ms=500", "--execute", "-f", "json",
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    [row] = json.loads(executed.stdout)
    assert row["name"] == "log.cleaner.backoff.ms" and row["current"] == "15000" and row["new"] == "500"
    described = kctl("broker", "config", "describe", "-b", bootstrap, "--broker", "0", "--all", "-f", "json")
    assert described.returncode == 0, described.stderr
    every = {entry["name"]: entry for entry in json.loads(described.stdout)}
    assert len(every) > 50
    entry = every["log.cleaner.backoff.ms"]
    assert (entry["value"], entry["source"], entry["read_only"]) == ("500", "DYNAMIC_BROKER_CONFIG", False)
    assert every["broker.id"]["read_only"] is True

    refused = kctl(
        "broker", "config", "alter", "-b", bootstrap, "--broker", "0",
        "--set", "broker.id=4", "--delete", "log.cleaner.backoff.ms", "--execute",
    )  # fmt: skip
    assert refused.returncode == 1 and "Cannot update these configs dynamically" in refused.stderr
    alter_broker(admin, "0", log_cleaner_backoff_ms=None)
    assert describe_broker(admin, "0")["log.cleaner.backoff.ms"].value == "15000"


def test_zookeeper_mode_stores_kafkas_znodes(zookeeper: Any, broker_factory: Any) -> None:
    chroot = f"/dyn-{uuid.uuid4().hex[:8]}"
    broker = broker_factory(
        {
            "zookeeper.connect": zookeeper.hosts + chroot,
            "zookeeper.session.timeout.ms": "6000",
            "broker.id": "5",
        }
    )
    admin = _admin(str(broker.bootstrap))
    alter_broker(admin, "", log_retention_bytes=123456789)
    alter_broker(admin, "5", leader_replication_throttled_rate=1000000)
    zk = KazooClient(hosts=zookeeper.hosts + chroot, timeout=10)
    zk.start(timeout=15)
    try:
        default, _ = zk.get("/config/brokers/<default>")
        assert json.loads(default) == {"version": 1, "config": {"log.retention.bytes": "123456789"}}
        own, _ = zk.get("/config/brokers/5")
        assert json.loads(own)["config"] == {"leader.replication.throttled.rate": "1000000"}
        notifications = [
            json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")
        ]
        assert {"version": 2, "entity_path": "brokers/<default>"} in notifications
        assert {"version": 2, "entity_path": "brokers/5"} in notifications
        # a change written by another party (Kafka's tools write the same znodes) is applied too
        zk.set(
            "/config/brokers/<default>",
            json.dumps({"version": 1, "config": {"compression.type": "gzip"}}).encode(),
        )
        zk.create(
            "/config/changes/config_change_",
            json.dumps({"version": 2, "entity_path": "brokers/<default>"}).encode(),
            sequence=True,
        )
    finally:
        zk.stop()
        zk.close()
    configs: dict[str, Any] = {}
    for _ in range(100):  # the broker hears the notification through its watch
        configs = describe_broker(admin, "5")
        if configs["compression.type"].value == "gzip":
            break
    assert configs["compression.type"].value == "gzip"
    assert configs["compression.type"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert configs["log.retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["leader.replication.throttled.rate"].value == "1000000"


def test_kafkas_thread_pool_and_kerberos_configs_are_dynamic(admin: AdminClient) -> None:
    """Kafka's thread-pool sizes (background.threads, num.io.threads, ...: cluster-wide) and SASL/Kerberos
    listener configs (sasl.kerberos.*: per broker) are dynamic broker configs; librdkafka's 0081_admin
    alters sasl.kerberos.min.time.before.relogin (AlterConfigs) and background.threads with
    log.cleanup.policy (IncrementalAlterConfigs SET/APPEND, then DELETE/SUBTRACT) on a broker."""
    legacy = ConfigResource(
        ConfigResource.Type.BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"}
    )
    [future] = admin.alter_configs([legacy]).values()
    future.result(15)
    configs = describe_broker(admin, "0")
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "58000"
    assert configs["sasl.kerberos.min.time.before.relogin"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not configs["background.threads"].is_read_only and configs["background.threads"].value == "10"

    def incremental(*entries: tuple[str, str | None, AlterConfigOpType]) -> None:
        resource = ConfigResource(
            ConfigResource.Type.BROKER,
            "0",
            incremental_configs=[ConfigEntry(n, v, incremental_operation=op) for n, v, op in entries],
        )
        [future] = admin.incremental_alter_configs([resource]).values()
        future.result(15)

    incremental(
        ("background.threads", "9", AlterConfigOpType.SET),
        ("log.cleanup.policy", "compact", AlterConfigOpType.APPEND),
    )
    configs = describe_broker(admin, "0")
    assert configs["background.threads"].value == "9"
    assert configs["log.cleanup.policy"].value == "delete,compact"
    incremental(
        ("background.threads", None, AlterConfigOpType.DELETE),
        ("log.cleanup.policy", "compact", AlterConfigOpType.SUBTRACT),
    )
    configs = describe_broker(admin, "0")
    assert configs["background.threads"].value == "10"
    assert configs["log.cleanup.policy"].value == "delete"
    with pytest.raises(KafkaException) as raised:
        alter_broker(admin, "0", num_io_threads=0)
    assert raised.value.args[0].name() == "INVALID_REQUEST"

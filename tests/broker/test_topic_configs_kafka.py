"""Every topic config Apache Kafka 3.9 documents is accepted by CreateTopics, AlterConfigs and
IncrementalAlterConfigs (confluent-kafka, kafka-python and `kctl topic create --topic-config`),
stored and described; bad values are INVALID_CONFIG; the ones kctl does not act on say so."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from kctl.log.config import NO_EFFECT, TOPIC_CONFIGS

#: Kafka 3.9's topic configs (TopicConfig / the "Topic-Level Configs" page), each with a valid
#: value other than its default.
KAFKA_39_TOPIC_CONFIGS = {
    "cleanup.policy": "compact,delete",
    "compression.type": "zstd",
    "compression.gzip.level": "5",
    "compression.lz4.level": "3",
    "compression.zstd.level": "7",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1000",
    "flush.messages": "1000",
    "flush.ms": "1000",
    "follower.replication.throttled.replicas": "0:1,0:2",
    "index.interval.bytes": "1000",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "1000",
    "local.retention.ms": "1000",
    "max.compaction.lag.ms": "100000",
    "max.message.bytes": "100000",
    "message.downconversion.enable": "false",
    "message.format.version": "2.8",
    "message.timestamp.after.max.ms": "100000",
    "message.timestamp.before.max.ms": "100000",
    "message.timestamp.difference.max.ms": "100000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.2",
    "min.compaction.lag.ms": "1000",
    "min.insync.replicas": "1",
    "preallocate": "true",
    "remote.storage.enable": "false",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "retention.bytes": "100000000",
    "retention.ms": "100000000",
    "segment.bytes": "100000",
    "segment.index.bytes": "100000",
    "segment.jitter.ms": "1000",
    "segment.ms": "100000000",
    "unclean.leader.election.enable": "true",
}

BAD_VALUES = {
    "compression.type": "brotli",
    "compression.gzip.level": "10",
    "compression.lz4.level": "0",
    "leader.replication.throttled.replicas": "broker-1",
    "message.format.version": "latest",
    "segment.jitter.ms": "-5",
}


@pytest.fixture(scope="module")
def bootstrap(module_broker_factory: Any) -> str:
    return str(module_broker_factory().bootstrap)


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _describe(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    [future] = admin.describe_configs([resource]).values()
    return dict(future.result(15))


def test_the_table_holds_every_kafka_39_topic_config() -> None:
    assert set(KAFKA_39_TOPIC_CONFIGS) <= set(TOPIC_CONFIGS)
    for name, key in TOPIC_CONFIGS.items():
        assert (NO_EFFECT in key.doc) is (not key.applied), name
    assert not TOPIC_CONFIGS["message.format.version"].applied
    assert TOPIC_CONFIGS["compression.type"].applied


def test_create_topics_with_every_config_and_describe(admin: AdminClient) -> None:
    topic = _name("all-configs")
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=KAFKA_39_TOPIC_CONFIGS)])
    futures[topic].result(15)
    described = _describe(admin, topic)
    for name, value in KAFKA_39_TOPIC_CONFIGS.items():
        entry = described[name]
        assert entry.value == value, name
        assert entry.source == ConfigSource_DYNAMIC_TOPIC, name
    # defaults of the new configs, and the no-effect note in the documentation
    other = _name("defaults")
    admin.create_topics([NewTopic(other, 1, 1)])[other].result(15)
    defaults = _describe(admin, other)
    assert defaults["compression.type"].value == "producer"
    assert defaults["message.timestamp.after.max.ms"].value == str(2**63 - 1)
    assert defaults["local.retention.ms"].value == "-2"
    assert defaults["follower.replication.throttled.replicas"].value == ""
    assert defaults["message.format.version"].value == "3.0-IV1"


ConfigSource_DYNAMIC_TOPIC = 1  # confluent-kafka's ConfigSource.DYNAMIC_TOPIC_CONFIG value

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_create_topics_refuses_bad_values(admin: AdminClient, name: str) -> None:
    topic = _name("bad")
    with pytest.raises(KafkaException) as raised:
        admin.create_topics([NewTopic(topic, 1, 1, config={name: BAD_VALUES[name]})])[topic].result(15)
    assert raised.value.args[0].name() == "INVALID_CONFIG"
    assert name in raised.value.args[0].str()


def test_incremental_alter_configs(admin: AdminClient) -> None:
    topic = _name("incr")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("compression.type", "lz4", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "follower.replication.throttled.replicas",
                "0:1",
                incremental_operation=AlterConfigOpType.APPEND,
            ),
            ConfigEntry(
                "message.downconversion.enable", "false", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    [future] = admin.incremental_alter_configs([resource]).values()
    future.result(15)
    described = _describe(admin, topic)
    assert described["compression.type"].value == "lz4"
    assert described["follower.replication.throttled.replicas"].value == "0:1"
    assert described["message.downconversion.enable"].value == "false"
    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("compression.type", "brotli", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [future] = admin.incremental_alter_configs([bad]).values()
    with pytest.raises(KafkaException) as raised:
        future.result(15)
    assert raised.value.args[0].name() == "INVALID_CONFIG"
    assert _describe(admin, topic)["compression.type"].value == "lz4"  # nothing changed


def test_kafka_python_alter_configs(bootstrap: str, admin: AdminClient) -> None:
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    topic = _name("legacy")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    configs = {"compression.type": "gzip", "segment.jitter.ms": "500", "max.compaction.lag.ms": "9000"}
    try:
        # incremental=False: the legacy AlterConfigs (replaces the topic's overrides)
        altered = client.alter_configs(
            [KpResource(ConfigResourceType.TOPIC, topic, configs=configs)], incremental=False
        )
        described = client.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)])
    finally:
        client.close()
    assert altered == {"topic": {topic: "OK"}}
    [[entries]] = [list(by_name.values()) for by_name in described.values()]
    entries = {name: data["value"] if isinstance(data, dict) else data for name, data in entries.items()}
    assert entries["compression.type"] == "gzip"
    assert entries["segment.jitter.ms"] == "500"
    assert entries["max.compaction.lag.ms"] == "9000"


def test_kctl_topic_create_with_new_configs(bootstrap: str) -> None:
    topic = _name("cli")
    created = subprocess.run(
        [
            sys.executable,
            "-m",
            "kctl",
            "topic",
            "create",
            topic,
            "-b",
            bootstrap,
            "--topic-config",
            "compression.type=snappy",
            "--topic-config",
            "message.timestamp.before.max.ms=60000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    described = subprocess.run(
        [
            sys.executable,
            "-m",
            "kctl",
            "topic",
            "describe",
            topic,
            "-b",
            bootstrap,
            "--all-configs",
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0, described.stderr
    text = json.dumps(json.loads(described.stdout))
    assert '"compression.type"' in text and '"snappy"' in text
    assert '"60000"' in text


@pytest.mark.parametrize("version", ["0.10.0.0", "0.11.0.3", "2.8.1", "3.0.0-IV1"])
def test_message_format_version_takes_kafkas_long_forms(admin: AdminClient, version: str) -> None:
    """Kafka's MetadataVersion.fromVersionString keeps the first three segments of a 0.x version
    and the first two of a later one, so the release numbers clients send are valid:
    librdkafka's 0092_mixed_msgver alters message.format.version to '0.10.0.0' (AlterConfigs)."""
    topic = _name("msgfmt")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, topic, set_config={"message.format.version": version}
    )
    [future] = admin.alter_configs([resource]).values()
    future.result(15)
    assert _describe(admin, topic)["message.format.version"].value == version

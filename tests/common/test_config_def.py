"""kctl.common.config_def: one parser per type, validators, synonyms, defaults, errors, and the
definition tables built on it (topic, broker, client, producer, group) agreeing with their classes."""

from __future__ import annotations

import dataclasses

import pytest

from kctl.broker.config import BROKER_CONFIGS, BrokerConfig, BrokerConfigError
from kctl.client.config import CLIENT_CONFIGS, ClientConfig, ClientConfigError
from kctl.client.group_config import GROUP_CONFIGS, GroupConfig
from kctl.client.producer_config import PRODUCER_CONFIGS, ProducerConfig
from kctl.common.config_def import (
    INT_MAX,
    LONG_MAX,
    NO_DEFAULT,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    Custom,
    Dynamic,
    Importance,
    OneOf,
    Range,
    Synonym,
    format_value,
    parse_duration_ms,
    parse_value,
)
from kctl.log.config import TOPIC_CONFIGS, InvalidConfigError, LogConfig, parse_topic_config


@pytest.mark.parametrize(
    ("config_type", "text", "value"),
    [
        (ConfigType.BOOLEAN, " TRUE ", True),
        (ConfigType.BOOLEAN, "false", False),
        (ConfigType.BOOLEAN, True, True),
        (ConfigType.INT, " -12 ", -12),
        (ConfigType.INT, str(INT_MAX), INT_MAX),
        (ConfigType.LONG, str(LONG_MAX), LONG_MAX),
        (ConfigType.LONG, 7, 7),
        (ConfigType.DOUBLE, "0.25", 0.25),
        (ConfigType.DOUBLE, 1, 1.0),
        (ConfigType.STRING, "  a b  ", "a b"),
        (ConfigType.LIST, " a, b ,,c ", ["a", "b", "c"]),
        (ConfigType.LIST, "", []),
        (ConfigType.LIST, frozenset({"b", "a"}), ["a", "b"]),
        (ConfigType.CLASS, " pkg.Mod ", "pkg.Mod"),
        (ConfigType.PASSWORD, "s3cret", "s3cret"),
    ],
)
def test_one_parser_per_type(config_type: ConfigType, text: object, value: object) -> None:
    assert parse_value("k", config_type, text) == value


@pytest.mark.parametrize(
    ("config_type", "text", "message"),
    [
        (ConfigType.BOOLEAN, "yes", "k: expected true or false, got 'yes'"),
        (ConfigType.BOOLEAN, "1", "k: expected true or false, got '1'"),
        (ConfigType.INT, "1.5", "k: expected an integer, got '1.5'"),
        (ConfigType.INT, True, "k: expected an integer, got True"),
        (ConfigType.INT, str(INT_MAX + 1), f"k: {INT_MAX + 1} does not fit in the range"),
        (ConfigType.LONG, str(LONG_MAX + 1), "does not fit in the range"),
        (ConfigType.DOUBLE, "half", "k: expected a number, got 'half'"),
        (ConfigType.LIST, 5, "k: expected a comma-separated list, got 5"),
    ],
)
def test_parse_errors_name_the_key(config_type: ConfigType, text: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_value("k", config_type, text)
    assert info.value.key == "k"


def test_durations() -> None:
    assert [parse_duration_ms("d", t) for t in ("1500", "1500ms", "30s", "5m", "2h", "7d", "-1")] == [
        1500,
        1500,
        30_000,
        300_000,
        7_200_000,
        604_800_000,
        -1,
    ]
    with pytest.raises(ConfigError, match="d: expected a duration"):
        parse_duration_ms("d", "5 weeks")


def test_validators() -> None:
    key = ConfigKey("r", ConfigType.INT, 5, Range(1, 10))
    assert key.parse("10") == 10
    with pytest.raises(ConfigError, match="r: must be at least 1, got 0"):
        key.parse("0")
    with pytest.raises(ConfigError, match="r: must be at most 10, got 11"):
        key.parse("11")
    assert (Range(1, 10).describe(), Range(0).describe(), Range(None, 3).describe()) == (
        "[1,...,10]",
        "[0,...]",
        "[...,3]",
    )
    one = ConfigKey("o", ConfigType.STRING, "b", OneOf(("Alpha", "b"), case_insensitive=True))
    assert one.parse("ALPHA") == "Alpha"
    with pytest.raises(ConfigError, match="o: expected one of Alpha, b, got 'c'"):
        one.parse("c")
    many = ConfigKey("m", ConfigType.LIST, "a", OneOf(("a", "b")))
    assert many.parse("b,a") == ["b", "a"]
    with pytest.raises(ConfigError, match="m: expected one of a, b, got 'z'"):
        many.parse("a,z")

    def even(value: int) -> int:
        if value % 2:
            raise ValueError("must be even")
        return value // 2

    custom = ConfigKey("e", ConfigType.INT, 4, Custom(even, "even numbers"))
    assert (custom.parse("8"), custom.parsed_default) == (4, 2)
    with pytest.raises(ConfigError, match="e: must be even"):
        custom.parse("3")


def test_defaults_are_parsed_and_checked_when_defined() -> None:
    assert ConfigKey("b", ConfigType.BOOLEAN, "TRUE").parsed_default is True
    with pytest.raises(ConfigError, match="n: must be at least 1, got 0"):
        ConfigKey("n", ConfigType.INT, 0, Range(1))


def test_parse_fills_defaults_reports_unknown_and_requires() -> None:
    definition = ConfigDef(
        "demo",
        [
            ConfigKey("need", ConfigType.STRING, NO_DEFAULT, importance=Importance.HIGH),
            ConfigKey("n", ConfigType.INT, 3),
            ConfigKey("null", ConfigType.INT, None),
        ],
    )
    parsed = definition.parse({"need": "x", "null": " ", "zzz": "1", "aaa": "2"})
    assert parsed.values == {"need": "x", "n": 3, "null": None}
    assert parsed.given == {"need": "x", "null": " "}
    assert parsed.unknown == ("aaa", "zzz")
    assert (parsed.source("need"), parsed.source("n")) == ("given", "default")
    with pytest.raises(ConfigError, match="unknown demo config 'aaa'"):
        definition.parse({"need": "x", "aaa": "1"}, allow_unknown=False)
    with pytest.raises(ConfigError, match="need: required demo config has no value"):
        definition.parse({})
    with pytest.raises(ValueError, match="defined twice"):
        ConfigDef("demo", [ConfigKey("a", ConfigType.INT, 1), ConfigKey("a", ConfigType.INT, 2)])


def test_synonyms_fill_a_null_key_with_a_factor() -> None:
    definition = ConfigDef(
        "demo",
        [
            ConfigKey(
                "t.ms",
                ConfigType.LONG,
                None,
                synonyms=(Synonym("t.minutes", 60_000), Synonym("t.hours", 3_600_000)),
            ),
            ConfigKey("t.minutes", ConfigType.INT, None),
            ConfigKey("t.hours", ConfigType.INT, 168),
        ],
    )
    assert definition.parse({}).values["t.ms"] == 168 * 3_600_000
    assert definition.parse({"t.minutes": "2"}).values["t.ms"] == 120_000
    assert definition.parse({"t.ms": "5", "t.minutes": "2"}).values["t.ms"] == 5
    assert definition.parse({"t.hours": "-1"}).values["t.ms"] == -1  # unlimited stays unlimited


def test_the_definition_error_type_is_raised() -> None:
    with pytest.raises(BrokerConfigError, match=r"num\.partitions: must be at least 1, got 0"):
        BrokerConfig({"num.partitions": "0"})
    with pytest.raises(InvalidConfigError, match="unknown topic config 'nope'"):
        parse_topic_config({"nope": "1"})
    with pytest.raises(ClientConfigError, match=r"request\.timeout\.ms: expected an integer, got 'x'"):
        ClientConfig.from_properties({"request.timeout.ms": "x"})


def test_describe_rows_for_docs() -> None:
    [row] = [r for r in TOPIC_CONFIGS.describe() if r["name"] == "retention.ms"]
    assert row == {
        "name": "retention.ms",
        "type": "long",
        "default": "604800000",
        "valid_values": "[-1,...]",
        "importance": "high",
        "dynamic": "per-topic",
        "synonyms": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
        "applied": True,
        "documentation": "Age after which whole segments are deleted (-1: forever).",
    }
    rows = BROKER_CONFIGS.describe()
    dynamic = {r["name"]: r["dynamic"] for r in rows if r["dynamic"] != Dynamic.READ_ONLY}
    assert dynamic["listeners"] == Dynamic.PER_BROKER and dynamic["log.retention.ms"] == Dynamic.CLUSTER_WIDE
    assert "num.partitions" not in dynamic and "log.retention.check.interval.ms" not in dynamic  # as Kafka
    assert format_value(frozenset({"delete", "compact"})) == "compact,delete"


@pytest.mark.parametrize(
    ("definition", "cls"),
    [
        (TOPIC_CONFIGS, LogConfig),
        (CLIENT_CONFIGS, ClientConfig),
        (PRODUCER_CONFIGS, ProducerConfig),
        (GROUP_CONFIGS, GroupConfig),
    ],
)
def test_tables_and_classes_agree(definition: ConfigDef, cls: type) -> None:
    instance = cls()
    fields = {f.name for f in dataclasses.fields(cls)} - {"unknown"}
    assert {key.attribute for key in definition.values()} == fields
    for key in definition.values():
        assert getattr(instance, key.attribute) == key.parsed_default, key.name
        assert key.doc, f"{key.name} has no documentation"


def test_every_topic_config_has_a_broker_default_property() -> None:
    without = {  # as in Kafka: no broker property sets their default
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    }
    for key in TOPIC_CONFIGS.values():
        if key.name in without:
            assert not key.synonyms, key.name
        else:
            assert key.synonyms and key.synonyms[0].name in BROKER_CONFIGS, key.name
    config = BrokerConfig({"log.roll.hours": "2", "log.retention.minutes": "3"})
    assert (config.log_config.segment_ms, config.log_config.retention_ms) == (7_200_000, 180_000)
    assert config["zookeeper.connection.timeout.ms"] == config["zookeeper.session.timeout.ms"]


def test_one_coerce_for_every_client_config() -> None:
    group = GroupConfig.coerce({"group.id": "g", "request.timeout.ms": "5000", "bogus": "1"})
    assert (group.group_id, group.request_timeout_ms, group.unknown) == ("g", 5000, ("bogus",))
    producer = ProducerConfig.coerce(group, linger_ms=7)
    assert (producer.request_timeout_ms, producer.linger_ms, producer.acks) == (5000, 7, -1)
    assert ProducerConfig.coerce(producer) is producer
    assert ClientConfig.coerce(producer) is producer
    assert GroupConfig.coerce(None, group_id="x").group_id == "x"

"""A running broker's logger levels changed without a restart (issue 26 §4), through Kafka's
BROKER_LOGGER config resource (type 8), on a real `kctl broker start` process: what DescribeConfigs
lists, IncrementalAlterConfigs SET and DELETE taking effect at once (the request log starts and stops
writing, on connections opened before the change too), Kafka's errors (an unknown logger or level,
the legacy AlterConfigs, another broker's id, deleting the root's level), and nothing kept over a
restart. Through `kctl broker logger` as a user types it, and the admin client / raw requests for the
wire. (Kafka's own kafka-configs.sh: tests/e2e/test_kafka_cli_tools.py; authorization:
tests/broker/test_e2e_security.py.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from cli_support import kctl

from kctl.client import AdminClient
from kctl.client.connection import BrokerConnection, parse_address
from kctl.client.producer.producer import Producer
from kctl.protocol import ApiKey
from kctl.protocol.configs import ConfigSource
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from kctl.testing import BrokerProcess, create_topic, wait_for
from kctl.testing.pytest_plugin import BrokerFactory

TOPIC = "loggers"
#: a request log line (text format), its client id captured
REQUEST_LINE = re.compile(r" DEBUG kctl\.request: Completed request: .*client_id=(\S+)")
BROKER_LOGGER = 8


@pytest.fixture(scope="module")
def broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    """One broker whose group coordinator logs at DEBUG by configuration (a level of its own)."""
    started: BrokerProcess = module_broker_factory({"log.level.kctl.broker.group": "DEBUG"})
    create_topic(started.bootstrap, TOPIC)
    return started


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    with AdminClient(broker.bootstrap) as client:
        yield client


@pytest.fixture(autouse=True)
def request_log_back_off(broker: BrokerProcess) -> Iterator[None]:
    """Each test leaves the request log as configured (off), whatever it changed."""
    yield
    with AdminClient(broker.bootstrap) as client:
        client.alter_broker_loggers(broker.broker_id, delete=["kctl.request", "kctl.broker.group"])


def _logged_clients(broker: BrokerProcess) -> list[str]:
    """The client ids of the request log's lines, in order."""
    text = broker.log_file.read_text(errors="replace")
    return [m[1] for m in map(REQUEST_LINE.search, text.splitlines()) if m is not None]


def _produce(producer: Producer) -> None:
    producer.produce_sync(TOPIC, b"v", partition=0, timeout=30)


def _levels(admin: AdminClient, broker: BrokerProcess) -> dict[str, tuple[str | None, ConfigSource]]:
    return {e.name: (e.value, e.source) for e in admin.describe_broker_loggers(broker.broker_id)}


def test_describe_lists_every_logger_with_its_level_and_source(
    broker: BrokerProcess, admin: AdminClient
) -> None:
    levels = _levels(admin, broker)
    assert levels["root"] == ("INFO", ConfigSource.STATIC_BROKER_CONFIG)  # log.level's default
    assert levels["kctl.broker.group"] == ("DEBUG", ConfigSource.STATIC_BROKER_CONFIG)  # configured
    assert levels["kctl.request"] == ("INFO", ConfigSource.DEFAULT_CONFIG)  # inherits the root's
    assert levels["kazoo"] == ("WARN", ConfigSource.STATIC_BROKER_CONFIG)
    assert {"kctl.broker", "kctl.broker.server", "asyncio"} <= set(levels)

    out = kctl("broker", "logger", "describe", "-b", broker.bootstrap, "-f", "json")
    assert out.returncode == 0, out.stderr
    rows = {row["logger"]: row for row in json.loads(out.stdout)}
    # by default only the loggers with a level of their own
    assert rows["kctl.broker.group"] == {
        "broker_id": broker.broker_id,
        "logger": "kctl.broker.group",
        "level": "DEBUG",
        "source": "STATIC_BROKER_CONFIG",
    }
    assert "kctl.request" not in rows and "root" in rows
    out = kctl("broker", "logger", "describe", "-b", broker.bootstrap, "--all", "-f", "json")
    assert {row["logger"] for row in json.loads(out.stdout)} == set(levels)
    out = kctl("broker", "logger", "describe", "kctl.request", "-b", broker.bootstrap)
    assert out.returncode == 0 and re.search(r"kctl\.request\s+INFO\s+DEFAULT_CONFIG", out.stdout), out.stdout
    out = kctl("broker", "logger", "describe", "no.such.logger", "-b", broker.bootstrap)
    assert out.returncode == 3 and "no logger no.such.logger" in out.stderr, out.stderr
    out = kctl("broker", "logger", "describe", "--broker", "7", "-b", broker.bootstrap)
    assert out.returncode == 3 and "no broker 7" in out.stderr, out.stderr


def test_the_request_log_starts_and_stops_without_a_restart(
    broker: BrokerProcess, admin: AdminClient
) -> None:
    cli = ("-b", broker.bootstrap)
    with Producer(broker.bootstrap, {"client.id": "opened-before"}) as early:
        _produce(early)  # its connection is open before the change
        # the plan only: validated, nothing changes
        plan = kctl(
            "broker",
            "logger",
            "alter",
            "--broker",
            str(broker.broker_id),
            "--set",
            "kctl.request=DEBUG",
            *cli,
        )
        assert plan.returncode == 0, plan.stderr
        assert re.search(r"kctl\.request\s+set\s+INFO\s+DEBUG", plan.stdout), plan.stdout
        assert "add --execute" in plan.stderr
        assert _levels(admin, broker)["kctl.request"] == ("INFO", ConfigSource.DEFAULT_CONFIG)

        done = kctl(
            "broker",
            "logger",
            "alter",
            "--broker",
            str(broker.broker_id),
            "--set",
            "kctl.request=DEBUG",
            "--execute",
            *cli,
        )
        assert done.returncode == 0, done.stderr
        assert _levels(admin, broker)["kctl.request"] == ("DEBUG", ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)
        _produce(early)
        with Producer(broker.bootstrap, {"client.id": "opened-after"}) as late:
            _produce(late)
        wait_for(
            lambda: {"opened-before", "opened-after"} <= set(_logged_clients(broker)),
            "request log lines of both producers",
            describe=broker.log_tail,
        )

        # back to the configured level (off): a producer's requests now go unlogged ...
        back = kctl(
            "broker",
            "logger",
            "alter",
            "--broker",
            str(broker.broker_id),
            "--delete",
            "kctl.request",
            "--execute",
            *cli,
        )
        assert back.returncode == 0, back.stderr
        assert _levels(admin, broker)["kctl.request"] == ("INFO", ConfigSource.DEFAULT_CONFIG)
        _produce(early)
        with Producer(broker.bootstrap, {"client.id": "while-off"}) as quiet:
            _produce(quiet)
        logged_before = _logged_clients(broker).count("opened-before")
    # ... as the next lines show: the log is on again (Kafka's name for the logger) and writes lines
    # after those requests', none of them
    admin.alter_broker_loggers(broker.broker_id, {"kafka.request.logger": "DEBUG"}).raise_for_error()
    with Producer(broker.bootstrap, {"client.id": "on-again"}) as again:
        _produce(again)
    wait_for(
        lambda: "on-again" in _logged_clients(broker), "the request log on again", describe=broker.log_tail
    )
    logged = _logged_clients(broker)
    assert "while-off" not in logged
    assert logged[: logged.index("on-again")].count("opened-before") == logged_before


def test_levels_of_other_loggers_change_their_lines(broker: BrokerProcess, admin: AdminClient) -> None:
    """The root at DEBUG turns the request log on too (its logger inherits), WARN on the configured
    kctl.broker.group silences its DEBUG lines; DELETE brings the configured DEBUG back."""
    admin.alter_broker_loggers(
        broker.broker_id, {"root": "DEBUG", "kctl.broker.group": "warn"}
    ).raise_for_error()
    levels = _levels(admin, broker)
    assert levels["kctl.request"] == ("DEBUG", ConfigSource.DEFAULT_CONFIG)
    assert levels["kctl.broker.group"] == ("WARN", ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)
    with Producer(broker.bootstrap, {"client.id": "root-debug"}) as producer:
        _produce(producer)
    wait_for(lambda: "root-debug" in _logged_clients(broker), "a request line", describe=broker.log_tail)
    admin.alter_broker_loggers(broker.broker_id, {"root": "INFO"}, ["kctl.broker.group"]).raise_for_error()
    levels = _levels(admin, broker)
    assert levels["kctl.broker.group"] == ("DEBUG", ConfigSource.STATIC_BROKER_CONFIG)
    assert levels["root"] == ("INFO", ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)
    assert levels["kctl.request"] == ("INFO", ConfigSource.DEFAULT_CONFIG)


def test_invalid_changes_are_refused_and_change_nothing(broker: BrokerProcess, admin: AdminClient) -> None:
    before = _levels(admin, broker)
    cli = (
        "broker",
        "logger",
        "alter",
        "--broker",
        str(broker.broker_id),
        "-b",
        broker.bootstrap,
        "--execute",
    )
    bad_level = kctl(*cli, "--set", "kctl.request=DEBUG", "--set", "kctl.broker=LOUD")
    assert bad_level.returncode == 1 and "INVALID_CONFIG" in bad_level.stderr, bad_level.stderr
    assert "'LOUD' is not a log level" in bad_level.stderr
    unknown = kctl(*cli, "--set", "no.such.logger=DEBUG")
    assert unknown.returncode == 1 and "INVALID_CONFIG" in unknown.stderr, unknown.stderr
    root = kctl(*cli, "--delete", "root")
    assert root.returncode == 1 and "INVALID_REQUEST" in root.stderr, root.stderr
    usage = kctl(*cli[:-1])
    assert usage.returncode == 2 and "nothing to change" in usage.stderr
    assert _levels(admin, broker) == before  # kctl.request not DEBUG: all or nothing

    with BrokerConnection(*parse_address(broker.bootstrap)) as conn:
        other = conn.request(
            ApiKey.DESCRIBE_CONFIGS,
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(
                        resource_type=BROKER_LOGGER, resource_name=name, configuration_keys=None
                    )
                    for name in ("1", "", "zero")
                ]
            ),
            1,
        )
        assert [r.error_code for r in other.results] == [ErrorCode.INVALID_REQUEST] * 3
        change = IncrementalAlterConfigsResource(
            resource_type=BROKER_LOGGER,
            resource_name="1",
            configs=[IncrementalAlterableConfig(name="kctl.request", config_operation=0, value="DEBUG")],
        )
        appended = IncrementalAlterConfigsResource(
            resource_type=BROKER_LOGGER,
            resource_name=str(broker.broker_id),
            configs=[IncrementalAlterableConfig(name="kctl.request", config_operation=2, value="DEBUG")],
        )
        altered = conn.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            IncrementalAlterConfigsRequest(resources=[change, appended], validate_only=False),
            0,
        )
        assert [r.error_code for r in altered.responses] == [ErrorCode.INVALID_REQUEST] * 2
        legacy = conn.request(
            ApiKey.ALTER_CONFIGS,
            AlterConfigsRequest(
                resources=[
                    AlterConfigsResource(
                        resource_type=BROKER_LOGGER,
                        resource_name=str(broker.broker_id),
                        configs=[AlterableConfig(name="kctl.request", value="DEBUG")],
                    )
                ],
                validate_only=False,
            ),
            0,
        )
        [result] = legacy.responses
        assert (
            result.error_code == ErrorCode.INVALID_REQUEST
            and "IncrementalAlterConfigs" in result.error_message
        )
    assert _levels(admin, broker) == before


def test_runtime_levels_are_not_kept_over_a_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    with AdminClient(broker.bootstrap) as admin:
        admin.alter_broker_loggers(broker.broker_id, {"kctl.request": "DEBUG"}).raise_for_error()
        assert _levels(admin, broker)["kctl.request"][0] == "DEBUG"
    broker.restart()
    with AdminClient(broker.bootstrap) as admin:
        assert _levels(admin, broker)["kctl.request"] == ("INFO", ConfigSource.DEFAULT_CONFIG)

"""The client plumbing the commands that talk to a running cluster share: client, producer and
consumer settings from ``--config``, ``-X``, ``--bootstrap-server`` and a command's own options;
creating a client; and client errors (and ``kctl.console``'s not-found errors) becoming
``KctlError``s with the documented exit statuses."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TypeVar

from kctl.client import (
    AdminClient,
    BrokerResponseError,
    ClientConfig,
    ClientConfigError,
    KafkaConnectionError,
    KafkaError,
)
from kctl.client.cluster import ClusterClient
from kctl.client.consumer import ConsumerConfig
from kctl.client.producer import ProducerConfig
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import known_properties, load_config
from kctl.console.selection import NotFoundError, check_topic
from kctl.protocol import ErrorCode

CONSUMER_DEFAULTS = {"auto.offset.reset": "earliest"}
"""Client properties the consuming commands set unless --config or -X do: records deleted under a
running `kctl consume` make it go on from the log start rather than jump to the end."""

ClientT = TypeVar("ClientT")
ClientConfigT = TypeVar("ClientConfigT", bound=ClientConfig)


def client_config(
    config_file: Path | None, overrides: list[str] | None, bootstrap_server: str
) -> tuple[str, ClientConfig]:
    """The bootstrap servers and the client settings from --config, -X and --bootstrap-server."""
    if config_file is not None and "=" in config_file.name and not config_file.exists():
        raise KctlError(
            f"--config takes a client properties FILE, not {str(config_file)!r}; "
            "give topic configs with --topic-config KEY=VALUE",
            ExitCode.USAGE,
        )
    resolved = load_config(config_file, overrides, bootstrap_server=bootstrap_server)
    properties = known_properties(resolved, ClientConfig.known_keys(), "client")
    try:
        config = ClientConfig.from_properties(properties)
    except ClientConfigError as error:
        raise KctlError(f"invalid client property {error}", ExitCode.USAGE) from None
    return resolved.bootstrap_servers, config


def producer_config(
    config_file: Path | None,
    overrides: list[str] | None,
    bootstrap_server: str,
    explicit: dict[str, str],
) -> tuple[str, ProducerConfig]:
    """The bootstrap servers and producer settings from --config, -X, --bootstrap-server and the
    command's own options (`explicit`, which win)."""
    resolved = load_config(config_file, overrides, bootstrap_server=bootstrap_server)
    known = ProducerConfig.known_keys()
    properties = known_properties(resolved, known, "producer")
    properties.update(explicit)
    try:
        config = ProducerConfig.from_properties(properties)
    except ClientConfigError as error:
        raise KctlError(f"invalid producer property {error}", ExitCode.USAGE) from None
    return resolved.bootstrap_servers, config  # type: ignore[return-value]


def consumer_config(
    config_file: Path | None, overrides: list[str] | None, bootstrap_server: str
) -> tuple[str, ConsumerConfig]:
    """The bootstrap servers and consumer settings from --config, -X and --bootstrap-server."""
    resolved = load_config(config_file, overrides, CONSUMER_DEFAULTS, bootstrap_server=bootstrap_server)
    known = ConsumerConfig.known_keys()
    properties = known_properties(resolved, known, "consumer")
    try:
        config = ConsumerConfig.from_properties(properties)
    except ClientConfigError as error:
        raise KctlError(f"invalid consumer property {error}", ExitCode.USAGE) from None
    return resolved.bootstrap_servers, config  # type: ignore[return-value]


def connect(
    factory: Callable[[str, ClientConfigT], ClientT], bootstrap: str, config: ClientConfigT
) -> ClientT:
    """``factory(bootstrap, config)`` (a Producer, Consumer, ClusterClient); a malformed bootstrap
    server list exits 2."""
    try:
        return factory(bootstrap, config)
    except ValueError as error:
        raise KctlError(f"invalid bootstrap servers {bootstrap!r}: {error}", ExitCode.USAGE) from None


def require_topic(bootstrap: str, config: ClientConfig, topic: str, partition: int | None = None) -> None:
    """Fail fast (exit 3) when no broker answers, the topic does not exist and is not created, or it
    has no ``partition``; exit 1 for another error of the topic."""
    cluster = connect(ClusterClient, bootstrap, config)
    try:
        with client_errors():
            check_topic(cluster, topic, partition)
    finally:
        cluster.close()


@contextlib.contextmanager
def client_errors(not_found: Collection[int] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,)) -> Iterator[None]:
    """Client errors escaping the block become KctlErrors: a connection failure or a topic or
    partition not found exits 3, a broker error whose code is in ``not_found`` exits 3, any other
    client error exits 1."""
    try:
        yield
    except NotFoundError as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    except KafkaConnectionError as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    except BrokerResponseError as error:
        code = ExitCode.NOT_FOUND if error.code in not_found else ExitCode.FAILURE
        raise KctlError(str(error), code) from None
    except KafkaError as error:
        raise KctlError(str(error), ExitCode.FAILURE) from None


@contextlib.contextmanager
def admin_session(
    config_file: Path | None,
    overrides: list[str] | None,
    bootstrap_server: str,
    *,
    not_found: Collection[int] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,),
) -> Iterator[AdminClient]:
    """An AdminClient, closed on exit; escaping client errors are mapped by ``client_errors``."""
    bootstrap, config = client_config(config_file, overrides, bootstrap_server)
    admin = connect(AdminClient, bootstrap, config)
    try:
        with client_errors(not_found):
            yield admin
    finally:
        admin.close()

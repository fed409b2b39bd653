"""The client plumbing the commands that talk to a running cluster share: client, producer and
consumer settings from ``--config``, ``-X``, ``--bootstrap-server`` and a command's own options;
creating a client; and client errors (and ``kctl.console``'s not-found errors) becoming
``KctlError``s with the documented exit statuses."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    BOOTSTRAP_SERVERS_KEY,
    BootstrapServer,
    ClusterOptions,
    ConfigSource,
    known_properties,
    load_config,
)

if TYPE_CHECKING:
    from kctl.client import AdminClient, ClientConfig
    from kctl.client.consumer import ConsumerConfig
    from kctl.client.group import GroupAdmin
    from kctl.client.producer import ProducerConfig
    from kctl.zk.consumer_registry import ConsumerRegistry

# The client library is imported inside the functions: command modules import this one at their
# top, and `kctl --help` or the offline log tools must not pay for kctl.client and kctl.protocol.

CONSUMER_DEFAULTS = {"auto.offset.reset": "earliest"}
"""Client properties the consuming commands set unless --config or -X do: records deleted under a
running `kctl consume` make it go on from the log start rather than jump to the end."""

ClientT = TypeVar("ClientT")
ClientConfigT = TypeVar("ClientConfigT", bound="ClientConfig")


def client_config(
    config_file: Path | None, overrides: list[str] | None, bootstrap_server: str
) -> tuple[str, ClientConfig]:
    """The bootstrap servers and the client settings from --config, -X and --bootstrap-server."""
    from kctl.client import ClientConfig, ClientConfigError

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
    from kctl.client import ClientConfigError
    from kctl.client.producer import ProducerConfig

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
    from kctl.client import ClientConfigError
    from kctl.client.consumer import ConsumerConfig

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
    from kctl.client.cluster import ClusterClient
    from kctl.console.selection import check_topic

    cluster = connect(ClusterClient, bootstrap, config)
    try:
        with client_errors():
            check_topic(cluster, topic, partition)
    finally:
        cluster.close()


@contextlib.contextmanager
def client_errors(not_found: Collection[int] | None = None) -> Iterator[None]:
    """Client errors escaping the block become KctlErrors: a connection failure or a topic or
    partition not found exits 3, a broker error whose code is in ``not_found`` (default:
    UNKNOWN_TOPIC_OR_PARTITION) exits 3, any other client error exits 1."""
    from kctl.client import BrokerResponseError, KafkaConnectionError, KafkaError
    from kctl.console.selection import NotFoundError
    from kctl.protocol import ErrorCode

    if not_found is None:
        not_found = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,)
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
    not_found: Collection[int] | None = None,
) -> Iterator[AdminClient]:
    """An AdminClient, closed on exit; escaping client errors are mapped by ``client_errors``."""
    from kctl.client import AdminClient

    bootstrap, config = client_config(config_file, overrides, bootstrap_server)
    admin = connect(AdminClient, bootstrap, config)
    try:
        with client_errors(not_found):
            yield admin
    finally:
        admin.close()


def zookeeper_bootstrap(cluster: ClusterOptions, registry: ConsumerRegistry | str) -> ClusterOptions:
    """``cluster`` with the brokers registered in ZooKeeper (``/brokers/ids``, as Kafka's ZooKeeper
    tools found them) as its bootstrap servers, when nothing names any: no ``-b``, no
    KCTL_BOOTSTRAP_SERVER, no ``bootstrap.servers`` in ``--config`` or ``-X`` (those win). The
    endpoint of each broker is the one of its listeners with the client's ``security.protocol``.
    No broker registered: exit 3. ``registry``: an open registry, or a connect string to open one."""
    resolved = load_config(cluster.config_file, cluster.overrides, bootstrap_server=cluster.bootstrap_server)
    if resolved.source(BOOTSTRAP_SERVERS_KEY) is not ConfigSource.DEFAULT:
        return cluster
    protocol = resolved.get("security.protocol", "PLAINTEXT")
    if isinstance(registry, str):
        from kctl.zk.consumer_registry import ConsumerRegistry
        from kctl.zk.model import RegistryUnavailableError

        try:
            with ConsumerRegistry(registry) as opened:
                return zookeeper_bootstrap(cluster, opened)
        except RegistryUnavailableError as error:
            raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    addresses = registry.broker_addresses(protocol)
    if not addresses:
        raise KctlError(
            f"no broker is registered in ZooKeeper at {registry.connect} (/brokers/ids is empty); "
            "name one with -b",
            ExitCode.NOT_FOUND,
        )
    return cluster._replace(bootstrap_server=BootstrapServer(",".join(addresses), ConfigSource.OPTION))


@contextlib.contextmanager
def group_admin(cluster: ClusterOptions, zookeeper: str | None = None) -> Iterator[GroupAdmin]:
    """The GroupAdmin of `kctl group`: of the broker-coordinated groups, or with ``zookeeper`` of
    the ZooKeeper-coordinated ones (``ZkGroupAdmin``; the brokers, for log offsets, found in
    ZooKeeper unless named: `zookeeper_bootstrap`). Client errors that escape become KctlErrors with
    the documented exit statuses."""
    from kctl.client.group import GroupAdmin, GroupNotEmptyError, NothingToRewindError
    from kctl.client.zkgroup import ZkGroupAdmin
    from kctl.protocol import ErrorCode
    from kctl.zk.consumer_registry import ConsumerRegistry
    from kctl.zk.model import RegistryUnavailableError

    not_found = (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    with contextlib.ExitStack() as stack:
        registry = None
        if zookeeper is not None:
            try:
                registry = stack.enter_context(ConsumerRegistry(zookeeper))
            except RegistryUnavailableError as error:
                raise KctlError(str(error), ExitCode.NOT_FOUND) from None
            cluster = zookeeper_bootstrap(cluster, registry)
        admin = stack.enter_context(admin_session(*cluster, not_found=not_found))
        try:  # inside admin_session: these client errors have exit statuses of their own
            yield GroupAdmin(admin) if registry is None else ZkGroupAdmin(admin, registry)
        except RegistryUnavailableError as error:
            raise KctlError(str(error), ExitCode.NOT_FOUND) from None
        except GroupNotEmptyError as error:
            raise KctlError(str(error), ExitCode.FAILURE) from None
        except NothingToRewindError as error:
            raise KctlError(str(error), ExitCode.NOT_FOUND) from None


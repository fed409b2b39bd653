"""The admin-client plumbing the commands that talk to a running cluster share: client settings
from ``--config``, ``-X`` and ``--bootstrap-server``, and an ``AdminClient`` whose escaping client
errors become ``KctlError``s with the documented exit statuses."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from pathlib import Path

from kctl.client import (
    AdminClient,
    BrokerResponseError,
    ClientConfig,
    ClientConfigError,
    KafkaConnectionError,
    KafkaError,
)
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import known_properties, load_config
from kctl.protocol import ErrorCode


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


@contextlib.contextmanager
def client_errors(not_found: Collection[int] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,)) -> Iterator[None]:
    """Client errors escaping the block become KctlErrors: a connection failure exits 3, a broker
    error whose code is in ``not_found`` exits 3, any other client error exits 1."""
    try:
        yield
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
    try:
        admin = AdminClient(bootstrap, config)
    except ValueError as error:
        raise KctlError(f"invalid bootstrap servers {bootstrap!r}: {error}", ExitCode.USAGE) from None
    try:
        with client_errors(not_found):
            yield admin
    finally:
        admin.close()

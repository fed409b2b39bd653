"""`kctl config`: show how kctl resolves its configuration (defaults, file, environment, -X), and
with --broker/--topic/--producer/--consumer every property of that definition table."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    BOOTSTRAP_SERVERS_KEY,
    DEFAULT_BOOTSTRAP_SERVER,
    DEFAULT_FORMAT,
    BootstrapServerOption,
    ConfigFileOption,
    ConfigOverrideOption,
    ConfigSource,
    FormatOption,
    ResolvedConfig,
    load_config,
)
from kctl.commands.output import info, render_rows
from kctl.common.config_def import ConfigDef, ConfigError

app = typer.Typer(help="Inspect how kctl resolves its configuration.", no_args_is_help=True)

SECRET_KEY = re.compile(r"password|secret|token|jaas|credential", re.IGNORECASE)
MASK = "********"


def is_secret(key: str) -> bool:
    """Whether the value of `key` is a credential that is masked unless --show-secrets is given."""
    return SECRET_KEY.search(key) is not None


def _consumer_configs() -> ConfigDef:
    """The group settings' table plus the consumer's own keys (``CONSUMER_CONFIGS``; the client keys
    both share are listed once)."""
    from kctl.client.consumer import CONSUMER_CONFIGS
    from kctl.client.group_config import GROUP_CONFIGS

    own = [key for name, key in CONSUMER_CONFIGS.items() if name not in GROUP_CONFIGS]
    return GROUP_CONFIGS.extend("consumer", own)


def definition(kind: str) -> ConfigDef:
    """The definition table `kctl config show --KIND` lists."""
    from kctl.broker.config import BROKER_CONFIGS
    from kctl.client.producer_config import PRODUCER_CONFIGS
    from kctl.log.config import TOPIC_CONFIGS

    if kind == "consumer":
        return _consumer_configs()
    return {"broker": BROKER_CONFIGS, "topic": TOPIC_CONFIGS, "producer": PRODUCER_CONFIGS}[kind]


def definition_rows(
    config_def: ConfigDef, resolved: ResolvedConfig, show_secrets: bool
) -> list[dict[str, Any]]:
    """One row per defined property (value, default, source), then the other keys given. A given
    value that does not parse is a usage error naming the key."""
    rows = []
    for name, key in config_def.items():
        entry = resolved.by_key.get(name)
        if entry is not None:
            try:
                config_def.parse_value(name, entry.value)
            except ConfigError as error:
                raise KctlError(f"invalid configuration: {error}", ExitCode.USAGE) from None
        value = entry.value if entry is not None else key.default_text()
        default = key.default_text()
        if (key.sensitive or is_secret(name)) and not show_secrets:
            value = MASK if value else value
            default = MASK if default else default
        rows.append(
            {
                "key": name,
                "value": value,
                "default": "(required)" if key.required else default,
                "source": str(entry.source) if entry is not None else "default",
            }
        )
    for entry in resolved.entries():
        if entry.key not in config_def:
            value = entry.value if show_secrets or not is_secret(entry.key) else MASK
            rows.append({"key": entry.key, "value": value, "default": None, "source": str(entry.source)})
    return rows


def _say_where_the_bootstrap_default_is_from(config: ResolvedConfig) -> None:
    entry = config.by_key.get(BOOTSTRAP_SERVERS_KEY)
    if entry is None or entry.source is not ConfigSource.LOCAL_CLUSTER:
        return
    from kctl.client.current_cluster import current_cluster, current_cluster_path

    current = current_cluster()
    if current is not None:
        info(f"bootstrap.servers: {current.describe()}; state in {current_cluster_path()}")


@app.command("show")
def show(
    fmt: FormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    bootstrap_server: BootstrapServerOption = DEFAULT_BOOTSTRAP_SERVER,
    show_secrets: Annotated[
        bool,
        typer.Option(
            "--show-secrets",
            help="Print the values of secret keys (passwords, tokens, JAAS configs) instead of masking them.",
        ),
    ] = False,
    broker: Annotated[
        bool, typer.Option("--broker", help="List every broker property (server.properties).")
    ] = False,
    topic: Annotated[bool, typer.Option("--topic", help="List every topic config.")] = False,
    producer: Annotated[bool, typer.Option("--producer", help="List every producer property.")] = False,
    consumer: Annotated[bool, typer.Option("--consumer", help="List every consumer property.")] = False,
) -> None:
    """Show the effective configuration: each key, its value, and where the value came from.

    Sources, lowest to highest precedence: default (built in), local-cluster (bootstrap.servers
    of the current local cluster, which `kctl cluster up` sets and `kctl cluster down` clears;
    said on stderr), clusters (a named cluster's properties), file (--config), env
    (KCTL_BOOTSTRAP_SERVER), -X (overrides, later ones win) and option (--bootstrap-server given
    on the command line).

    With --broker, --topic, --producer or --consumer, every property of that kind is listed with
    its value, its default and the value's source (default, file or -X), then any other keys
    given; a value that does not parse is an error.
    """
    kinds = [
        kind
        for kind, chosen in (
            ("broker", broker),
            ("topic", topic),
            ("producer", producer),
            ("consumer", consumer),
        )
        if chosen
    ]
    if len(kinds) > 1:
        raise KctlError("choose at most one of --broker, --topic, --producer, --consumer", ExitCode.USAGE)
    if kinds:
        kind = kinds[0]
        client = kind in ("producer", "consumer")
        resolved = load_config(config_file, overrides, bootstrap_server=bootstrap_server if client else None)
        _say_where_the_bootstrap_default_is_from(resolved)
        rows = definition_rows(definition(kind), resolved, show_secrets)
        render_rows(rows, ["key", "value", "default", "source"], fmt)
        return
    config = load_config(config_file, overrides, bootstrap_server=bootstrap_server)
    _say_where_the_bootstrap_default_is_from(config)
    rows = [
        {
            "key": entry.key,
            "value": entry.value if show_secrets or not is_secret(entry.key) else MASK,
            "source": entry.source,
        }
        for entry in config.entries()
    ]
    render_rows(rows, ["key", "value", "source"], fmt)

"""The options every command shares, defined once as `typing.Annotated` aliases, and `load_config`.

Use them in a command's signature with the defaults given here::

    def show(
        fmt: FormatOption = DEFAULT_FORMAT,
        config_file: ConfigFileOption = None,
        overrides: ConfigOverrideOption = None,
        bootstrap_server: BootstrapServerOption = DEFAULT_BOOTSTRAP_SERVER,
    ) -> None:
        config = load_config(config_file, overrides, bootstrap_server=bootstrap_server)

Commands that talk to a running cluster take `--config`, `-X` and `--bootstrap-server` through
`@cluster_options` instead: it appends them to the command's parameters (so `--help` lists them
last) and passes them as one `ClusterOptions` argument, `cluster`::

    @app.command("delete")
    @cluster_options
    def delete(topics: TopicsArgument, *, cluster: ClusterOptions) -> None:
        with admin_session(*cluster) as admin:
            ...

`--bootstrap-server` also takes a cluster name from the clusters file (`kctl.client.clusters_file`:
`--clusters FILE` on `kctl`, KCTL_CLUSTERS, `~/.config/kctl/clusters.toml`): its bootstrap servers
replace the name, and its client properties are a layer just above the command's defaults.

Configuration precedence, lowest to highest: `defaults` given by the command (the bootstrap default
being the current local cluster, `kctl.client.current_cluster`, when `kctl cluster up` set one, else
127.0.0.1:9092) < the named cluster's properties < the `--config`
file (Java .properties) < the KCTL_BOOTSTRAP_SERVER environment variable < `-X key=value`
overrides (later ones win) < an explicit `--bootstrap-server` on the command line. Only
`bootstrap.servers` comes from the environment or from `--bootstrap-server`; every resolved key
remembers its source.
"""

from __future__ import annotations

import difflib
import enum
import functools
import inspect
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypeVar

import typer

from kctl import properties
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.output import OutputFormat, warn

DEFAULT_FORMAT = OutputFormat.TABLE
DEFAULT_BOOTSTRAP_SERVER = "127.0.0.1:9092"
BOOTSTRAP_SERVER_ENV = "KCTL_BOOTSTRAP_SERVER"
BOOTSTRAP_SERVERS_KEY = "bootstrap.servers"


class Compression(enum.StrEnum):
    """The values of --compression (Kafka's compression.type for a producer)."""

    NONE = "none"
    GZIP = "gzip"
    SNAPPY = "snappy"
    LZ4 = "lz4"
    ZSTD = "zstd"


class Acks(enum.StrEnum):
    """The values of --acks (Kafka's acks): all (= -1), 1, 0."""

    ALL = "all"
    MINUS_ONE = "-1"
    ONE = "1"
    ZERO = "0"


class ConfigSource(enum.StrEnum):
    """Where a configuration value came from (shown by `kctl config show`)."""

    DEFAULT = "default"
    LOCAL_CLUSTER = "local-cluster"
    CLUSTERS = "clusters"
    FILE = "file"
    ENV = "env"
    OVERRIDE = "-X"
    OPTION = "option"


class BootstrapServer(str):
    """The `--bootstrap-server` value; `source` tells whether it was given, from env, or the default."""

    source: ConfigSource

    def __new__(cls, value: str, source: ConfigSource = ConfigSource.OPTION) -> BootstrapServer:
        obj = super().__new__(cls, value)
        obj.source = source
        return obj


class OverrideSyntaxError(ValueError):
    """A `-X` argument that is not `key=value` with a non-empty key without blanks."""


def parse_override(text: str) -> tuple[str, str]:
    """Split one `-X key=value` argument; the key is stripped, the value kept as given."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep:
        raise OverrideSyntaxError(f"expected KEY=VALUE, got {text!r}")
    if not key:
        raise OverrideSyntaxError(f"empty key in {text!r}")
    if any(ch.isspace() for ch in key):
        raise OverrideSyntaxError(f"key {key!r} contains whitespace")
    return key, value


def _check_overrides(ctx: typer.Context, values: list[str] | None) -> list[str] | None:
    if ctx.resilient_parsing:
        return values
    for text in values or ():
        try:
            parse_override(text)
        except OverrideSyntaxError as exc:
            raise typer.BadParameter(str(exc)) from None
    return values


_SOURCES_BY_CLICK_NAME = {"ENVIRONMENT": ConfigSource.ENV, "DEFAULT": ConfigSource.DEFAULT}


def _check_bootstrap(ctx: typer.Context, param: typer.CallbackParam, value: str) -> BootstrapServer:
    source_name = getattr(ctx.get_parameter_source(param.name or ""), "name", "")
    source = _SOURCES_BY_CLICK_NAME.get(source_name, ConfigSource.OPTION)
    value = value.strip()
    if not value and not ctx.resilient_parsing:
        raise typer.BadParameter("expected HOST:PORT[,HOST:PORT...], got an empty value")
    return BootstrapServer(value, source)


FormatOption = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        "-f",
        case_sensitive=False,
        help="Output format: table (aligned text), json (one array) or jsonl (one object per line).",
    ),
]
BytesOption = Annotated[
    bool,
    typer.Option(
        "--bytes",
        help="Sizes in tables as exact bytes (default: human-readable, e.g. 1.5MiB; JSON has bytes).",
    ),
]
CompressionOption = Annotated[
    Compression | None,
    typer.Option(
        "--compression",
        "-z",
        metavar="CODEC",
        help="none, gzip, snappy, lz4 or zstd (compression.type).",
        case_sensitive=False,
    ),
]
"""A producing command's --compression (`kctl produce`, `kctl perf produce`): compression.type."""
AcksOption = Annotated[
    Acks | None,
    typer.Option("--acks", "-a", metavar="ACKS", help="all (default), 1 or 0 (acks).", case_sensitive=False),
]
"""A producing command's --acks (`kctl produce`, `kctl perf produce`): acks."""
ConfigFileOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        dir_okay=False,
        help="Read configuration properties (Java .properties format) from FILE.",
    ),
]
ConfigOverrideOption = Annotated[
    list[str] | None,
    typer.Option(
        "-X",
        metavar="KEY=VALUE",
        callback=_check_overrides,
        help="Set a configuration property, overriding the --config file (repeatable).",
    ),
]
BootstrapServerOption = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "-b",
        metavar="HOST:PORT",
        envvar=BOOTSTRAP_SERVER_ENV,
        callback=_check_bootstrap,
        help="Broker(s) to connect to first, as HOST:PORT[,HOST:PORT...], or a name from the clusters file.",
    ),
]


# -- the cluster options, declared once ----------------------------------------------------------
R = TypeVar("R")


class ClusterOptions(NamedTuple):
    """``--config FILE``, the ``-X KEY=VALUE`` overrides and ``--bootstrap-server``, in the order
    ``admin_session``, ``client_config``, ``producer_config`` and ``consumer_config`` take them."""

    config_file: Path | None
    overrides: list[str] | None
    bootstrap_server: str


_KEYWORD = inspect.Parameter.KEYWORD_ONLY
_OPTIONS = [
    inspect.Parameter("config_file", _KEYWORD, default=None, annotation=ConfigFileOption),
    inspect.Parameter("overrides", _KEYWORD, default=None, annotation=ConfigOverrideOption),
    inspect.Parameter(
        "bootstrap_server", _KEYWORD, default=DEFAULT_BOOTSTRAP_SERVER, annotation=BootstrapServerOption
    ),
]


def cluster_options(command: Callable[..., R]) -> Callable[..., R]:
    """``command`` with the cluster options appended to its parameters; it receives them as its
    keyword-only ``cluster: ClusterOptions`` parameter."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for name, p in signature.parameters.items() if name != "cluster"]
    if len(own) == len(signature.parameters):
        raise TypeError(f"{command.__name__} has no 'cluster' parameter for its cluster options")

    @functools.wraps(command)
    def with_options(
        *args: Any,
        config_file: Path | None = None,
        overrides: list[str] | None = None,
        bootstrap_server: str = DEFAULT_BOOTSTRAP_SERVER,
        **kwargs: Any,
    ) -> R:
        return command(*args, cluster=ClusterOptions(config_file, overrides, bootstrap_server), **kwargs)

    parameters = [*own, *_OPTIONS]
    with_options.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    with_options.__annotations__ = {p.name: p.annotation for p in parameters} | {
        "return": signature.return_annotation
    }
    return with_options


@dataclass(frozen=True)
class ConfigValue:
    """One resolved configuration entry."""

    key: str
    value: str
    source: ConfigSource


@dataclass(frozen=True)
class ResolvedConfig(Mapping[str, str]):
    """The merged configuration: a read-only `key -> value` mapping that keeps each key's source."""

    by_key: Mapping[str, ConfigValue] = field(default_factory=dict)
    config_file: Path | None = None

    def __getitem__(self, key: str) -> str:
        return self.by_key[key].value

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_key)

    def __len__(self) -> int:
        return len(self.by_key)

    def source(self, key: str) -> ConfigSource:
        return self.by_key[key].source

    def entries(self) -> list[ConfigValue]:
        """All entries, sorted by key."""
        return list(self.by_key.values())

    @property
    def bootstrap_servers(self) -> str:
        return self.get(BOOTSTRAP_SERVERS_KEY, DEFAULT_BOOTSTRAP_SERVER)


def _read_config_file(path: Path) -> Mapping[str, str]:
    try:
        return properties.load(path)
    except FileNotFoundError:
        raise KctlError(f"config file not found: {path}", ExitCode.NOT_FOUND) from None
    except IsADirectoryError:
        raise KctlError(f"config file is a directory: {path}", ExitCode.USAGE) from None
    except OSError as exc:
        raise KctlError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except properties.PropertiesError as exc:
        raise KctlError(f"config file {path}: {exc}", ExitCode.USAGE) from None


def _check_key(key: str, allowed: Collection[str] | None, where: str) -> None:
    if allowed is None or key in allowed:
        return
    hint = difflib.get_close_matches(key, list(allowed), n=1)
    suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise KctlError(f"unknown configuration key {key!r} in {where}{suggestion}", ExitCode.USAGE)


def known_properties(
    resolved: ResolvedConfig, known: Collection[str], kind: str = "client"
) -> dict[str, str]:
    """The entries of ``resolved`` whose keys are in ``known``. An unknown key given with -X is a usage
    error (exit 2, with a "did you mean"); one from the --config file is reported and ignored, so a
    shared properties file can hold settings for other tools."""
    properties: dict[str, str] = {}
    for entry in resolved.entries():
        if entry.key in known:
            properties[entry.key] = entry.value
            continue
        hint = difflib.get_close_matches(entry.key, sorted(known), n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        if entry.source is ConfigSource.OVERRIDE:
            raise KctlError(f"unknown {kind} property {entry.key!r} in -X{suggestion}", ExitCode.USAGE)
        if entry.source is ConfigSource.CLUSTERS:
            continue  # a named cluster's properties serve every kind of client: others are not ours
        warn(f"ignoring unknown {kind} property {entry.key!r} in {resolved.config_file}{suggestion}")
    return properties


def default_bootstrap(default: str = DEFAULT_BOOTSTRAP_SERVER) -> tuple[str, ConfigSource]:
    """The bootstrap servers used when none is given (no -b, no KCTL_BOOTSTRAP_SERVER): the current
    local cluster's (`kctl cluster up`; kctl.client.current_cluster), else ``default``."""
    from kctl.client.current_cluster import current_cluster

    current = current_cluster()
    if current is None:
        return default, ConfigSource.DEFAULT
    return current.bootstrap_servers, ConfigSource.LOCAL_CLUSTER


def load_config(
    config_file: Path | str | None,
    overrides: Sequence[str] | None,
    defaults: Mapping[str, str] | None = None,
    *,
    bootstrap_server: str | None = None,
    allowed_keys: Collection[str] | None = None,
) -> ResolvedConfig:
    """Merge `defaults` < `config_file` < `overrides` (`-X key=value`), keeping each key's source.

    `bootstrap_server` (the `--bootstrap-server` value) sets `bootstrap.servers` at the layer its
    source calls for: its default (the current local cluster's when there is one) below the file,
    KCTL_BOOTSTRAP_SERVER above the file and below `-X`, an explicit option above everything (a
    plain str counts as explicit). With
    `allowed_keys`, any other key in the file or in `-X` is a usage error (exit 2), as is a
    malformed `-X`; a missing file is NOT_FOUND (exit 3), as is a missing clusters file named by
    `--clusters` or KCTL_CLUSTERS when `bootstrap_server` names a cluster (an invalid one: exit 2).
    """
    merged: dict[str, ConfigValue] = {}

    def put(key: str, value: str, source: ConfigSource) -> None:
        merged[key] = ConfigValue(key, value, source)

    bootstrap_source = getattr(bootstrap_server, "source", ConfigSource.OPTION)
    cluster_properties: Mapping[str, str] = {}
    if bootstrap_server is not None and bootstrap_source is ConfigSource.DEFAULT:
        bootstrap_server, bootstrap_source = default_bootstrap(str(bootstrap_server))
    elif bootstrap_server is not None:
        # here, not at the top: importing kctl.client costs the offline tools and --help their start-up
        from kctl.client.clusters_file import ClustersFileError, ClustersFileNotFoundError, resolve_cluster

        try:
            named = resolve_cluster(str(bootstrap_server))
        except ClustersFileNotFoundError as exc:  # as a missing --config FILE: something named is not there
            raise KctlError(str(exc), ExitCode.NOT_FOUND) from None
        except ClustersFileError as exc:
            raise KctlError(str(exc), ExitCode.USAGE) from None
        if named is not None:
            bootstrap_server = named.bootstrap_servers
            cluster_properties = named.properties
    if bootstrap_server is not None and allowed_keys is not None:
        allowed_keys = {*allowed_keys, BOOTSTRAP_SERVERS_KEY}

    def put_bootstrap(layer: ConfigSource) -> None:
        if bootstrap_server is not None and bootstrap_source is layer:
            put(BOOTSTRAP_SERVERS_KEY, str(bootstrap_server), layer)

    for key, value in (defaults or {}).items():
        put(key, str(value), ConfigSource.DEFAULT)
    put_bootstrap(ConfigSource.DEFAULT)
    put_bootstrap(ConfigSource.LOCAL_CLUSTER)
    for key, value in cluster_properties.items():
        put(key, value, ConfigSource.CLUSTERS)
    if config_file is not None:
        config_file = Path(config_file)
        for key, value in _read_config_file(config_file).items():
            _check_key(key, allowed_keys, f"config file {config_file}")
            put(key, value, ConfigSource.FILE)
    put_bootstrap(ConfigSource.ENV)
    for text in overrides or ():
        try:
            key, value = parse_override(text)
        except OverrideSyntaxError as exc:
            raise KctlError(f"invalid -X: {exc}", ExitCode.USAGE) from None
        _check_key(key, allowed_keys, "-X")
        put(key, value, ConfigSource.OVERRIDE)
    put_bootstrap(ConfigSource.OPTION)
    return ResolvedConfig(dict(sorted(merged.items())), config_file)


def parse_set_options(texts: list[str] | None, option: str = "--set") -> dict[str, str]:
    """The KEY=VALUE pairs of a repeated ``--set`` option (later ones win); KctlError (usage) for one
    that is not KEY=VALUE."""
    pairs: dict[str, str] = {}
    for text in texts or ():
        try:
            key, value = parse_override(text)
        except OverrideSyntaxError as error:
            raise KctlError(f"invalid {option}: {error}", ExitCode.USAGE) from None
        pairs[key] = value
    return pairs

"""Named clusters: the clusters file that maps a name (``dc1``, ``agg``) to bootstrap servers and
client properties, so that ``-b dc1`` works wherever ``-b host:port,...`` does.

Location, first found wins:

1. the file given with ``--clusters FILE`` (commands pass it as ``path``),
2. the ``KCTL_CLUSTERS`` environment variable,
3. ``$XDG_CONFIG_HOME/kctl/clusters.toml`` (``~/.config/kctl/clusters.toml`` by default).

Format (TOML; one table per cluster)::

    [dc1]
    bootstrap.servers = "10.0.1.1:9092,10.0.1.2:9092"

    [agg]
    bootstrap.servers = "10.9.0.1:9092"
    "request.timeout.ms" = "60000"        # any client property (security settings too)

Every key of a cluster's table other than ``bootstrap.servers`` is a client property; values are
given as strings or TOML scalars (converted with ``str``, booleans as ``true``/``false``). Dotted
keys nest in TOML, so ``bootstrap.servers = ...`` and ``"bootstrap.servers" = ...`` both work: the
nested tables are flattened back into Kafka's dotted names.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BOOTSTRAP_KEY",
    "CLUSTERS_ENV",
    "ClusterEntry",
    "ClustersFile",
    "ClustersFileError",
    "ClustersFileNotFoundError",
    "default_clusters_path",
    "load_clusters",
    "resolve_cluster",
]

CLUSTERS_ENV = "KCTL_CLUSTERS"
BOOTSTRAP_KEY = "bootstrap.servers"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ClustersFileError(ValueError):
    """The clusters file cannot be read or is not valid (the message names the file)."""


class ClustersFileNotFoundError(ClustersFileError):
    """A clusters file named explicitly (``--clusters``, KCTL_CLUSTERS) does not exist."""


@dataclass(frozen=True)
class ClusterEntry:
    """One named cluster: its bootstrap servers and its client properties."""

    name: str
    bootstrap_servers: str
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClustersFile:
    """The clusters of one file (``path`` None: no file exists at the default location)."""

    path: Path | None
    clusters: Mapping[str, ClusterEntry] = field(default_factory=dict)

    def get(self, name: str) -> ClusterEntry | None:
        return self.clusters.get(name)

    def names(self) -> list[str]:
        return sorted(self.clusters)


def default_clusters_path() -> Path:
    """``$XDG_CONFIG_HOME/kctl/clusters.toml``, ``~/.config/kctl/clusters.toml`` without it."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kctl" / "clusters.toml"


def clusters_path(path: Path | str | None = None) -> tuple[Path, bool]:
    """The clusters file to read and whether it was named explicitly (``path`` or KCTL_CLUSTERS):
    a named file must exist, the default one may be missing."""
    if path is not None and str(path):
        return Path(path), True
    env = os.environ.get(CLUSTERS_ENV)
    if env:
        return Path(env), True
    return default_clusters_path(), False


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            out[name] = str(value)
        elif isinstance(value, list):
            out[name] = ",".join(str(v) for v in value)
        else:
            raise ClustersFileError(f"property {name!r} has an unsupported value {value!r}")
    return out


def parse_clusters(text: str, path: Path | None = None) -> dict[str, ClusterEntry]:
    """The clusters of a clusters file's text; ClustersFileError on bad TOML or a cluster without
    ``bootstrap.servers``."""
    where = str(path) if path is not None else "clusters file"
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ClustersFileError(f"{where}: {error}") from None
    clusters: dict[str, ClusterEntry] = {}
    for name, table in document.items():
        if not isinstance(table, Mapping):
            raise ClustersFileError(f"{where}: {name!r} must be a table ([{name}]) of properties")
        if not _NAME.match(name) or ":" in name or "," in name:
            raise ClustersFileError(f"{where}: {name!r} is not a valid cluster name")
        try:
            properties = _flatten(table)
        except ClustersFileError as error:
            raise ClustersFileError(f"{where}: cluster {name!r}: {error}") from None
        bootstrap = properties.pop(BOOTSTRAP_KEY, "").strip()
        if not bootstrap:
            raise ClustersFileError(f"{where}: cluster {name!r} has no {BOOTSTRAP_KEY}")
        clusters[name] = ClusterEntry(name, bootstrap, properties)
    return clusters


def load_clusters(path: Path | str | None = None) -> ClustersFile:
    """Read the clusters file (see the module docstring for where it is looked for). A missing
    default file is an empty ClustersFile; a missing named one is a ClustersFileNotFoundError."""
    file, explicit = clusters_path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise ClustersFileNotFoundError(f"clusters file not found: {file}") from None
        return ClustersFile(None)
    except OSError as error:
        raise ClustersFileError(f"cannot read clusters file {file}: {error.strerror or error}") from None
    return ClustersFile(file, parse_clusters(text, file))


def looks_like_name(value: str) -> bool:
    """Whether a ``--bootstrap-server`` value could be a cluster name (no port, no list)."""
    return bool(_NAME.match(value)) and ":" not in value and "," not in value


def resolve_cluster(value: str, path: Path | str | None = None) -> ClusterEntry | None:
    """The cluster named ``value`` in the clusters file, or None when ``value`` is a bootstrap list
    (``host:port,...``) or a name the file does not have (then it is taken as a host name)."""
    value = value.strip()
    if not looks_like_name(value):
        return None
    return load_clusters(path).get(value)

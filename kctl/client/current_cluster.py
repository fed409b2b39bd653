"""The current local cluster: the last cluster ``kctl cluster up`` (or ``start``) brought up, which
every command talks to when no bootstrap server is given — as rpk's current profile — until
``kctl cluster down`` forgets it.

It is one small JSON file in kctl's state directory, first found of:

1. ``$KCTL_STATE_DIR`` (tests point it at a temporary directory),
2. ``$XDG_STATE_HOME/kctl``,
3. ``~/.local/state/kctl``;

named ``current-cluster.json``: ``{"directory": "/abs/kctl-cluster", "bootstrap_servers":
"127.0.0.1:P1,...", "set_by": "kctl cluster up", "set_at_ms": ...}``. It counts only while the
cluster's directory still holds its ``cluster.json`` (a deleted cluster is not current). Precedence
is the caller's (kctl.commands.options): an explicit ``-b``/``--bootstrap-server``, a named
cluster, ``KCTL_BOOTSTRAP_SERVER``, ``-X bootstrap.servers`` or ``bootstrap.servers`` in ``--config``
all win over it; it only replaces the built-in default ``127.0.0.1:9092``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "CURRENT_CLUSTER_FILE",
    "STATE_DIR_ENV",
    "CurrentCluster",
    "clear_current_cluster",
    "current_cluster",
    "current_cluster_path",
    "set_current_cluster",
]

STATE_DIR_ENV = "KCTL_STATE_DIR"
CURRENT_CLUSTER_FILE = "current-cluster.json"
CLUSTER_STATE_FILE = "cluster.json"  # kctl.localcluster.state.STATE_FILE (this layer may not import it)


@dataclass(frozen=True)
class CurrentCluster:
    """The current local cluster: its directory, bootstrap servers and which command set it."""

    directory: str
    bootstrap_servers: str
    set_by: str
    set_at_ms: int = 0

    def describe(self) -> str:
        """Where a bootstrap default came from, for ``kctl config show``."""
        return f"the current local cluster {self.directory} (set by `{self.set_by}`)"


def state_dir() -> Path:
    """kctl's state directory (see the module docstring)."""
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "kctl"


def current_cluster_path() -> Path:
    return state_dir() / CURRENT_CLUSTER_FILE


def current_cluster() -> CurrentCluster | None:
    """The current local cluster, None when none is set, the file is unreadable, or the cluster's
    directory no longer holds a cluster."""
    try:
        data = json.loads(current_cluster_path().read_text(encoding="utf-8"))
        current = CurrentCluster(
            str(data["directory"]),
            str(data["bootstrap_servers"]),
            str(data.get("set_by", "kctl cluster up")),
            int(data.get("set_at_ms", 0)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not current.bootstrap_servers or not (Path(current.directory) / CLUSTER_STATE_FILE).is_file():
        return None
    return current


def set_current_cluster(directory: Path | str, bootstrap_servers: str, set_by: str) -> CurrentCluster:
    """Make the cluster in ``directory`` the current one (the file is replaced atomically)."""
    current = CurrentCluster(
        str(Path(directory).resolve()), bootstrap_servers, set_by, int(time.time() * 1000)
    )
    path = current_cluster_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{CURRENT_CLUSTER_FILE}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(asdict(current), indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return current


def clear_current_cluster(directory: Path | str) -> bool:
    """Forget the current cluster when it is the one in ``directory``; whether it was."""
    path = current_cluster_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("directory") != str(Path(directory).resolve()):
        return False
    path.unlink(missing_ok=True)
    return True

"""Coordination: the ZooKeeper registry (kazoo) and the embedded single-node registry.

``open_registry`` picks the backend: with a ``zookeeper.connect`` string, cluster metadata lives in
ZooKeeper in Kafka's layout (kctl.zk.zookeeper, znode formats in kctl.zk.znodes); without one, the
broker is a cluster of one and keeps it under its data directory (kctl.zk.embedded). Both implement
kctl.zk.registry.Registry; the values and errors they share are in kctl.zk.model.
"""

from __future__ import annotations

from pathlib import Path

from kctl.zk.registry import Registry

__all__ = ["Registry", "open_registry"]


def open_registry(
    zookeeper_connect: str | None,
    metadata_dir: Path,
    *,
    session_timeout_ms: int = 18_000,
    connection_timeout_ms: int | None = None,
) -> Registry:
    """The registry for a broker: ZooKeeper when ``zookeeper_connect`` is set (Kafka's
    ``zookeeper.connect``, ``host:port[,...][/chroot]``), else the embedded registry in
    ``metadata_dir``. Not started: call ``start()`` (or use it as a context manager)."""
    if zookeeper_connect and zookeeper_connect.strip():
        from kctl.zk.zookeeper import ZooKeeperRegistry  # kazoo is only loaded when needed

        return ZooKeeperRegistry(
            zookeeper_connect.strip(),
            session_timeout_ms=session_timeout_ms,
            connection_timeout_ms=connection_timeout_ms,
        )
    from kctl.zk.embedded import EmbeddedRegistry

    return EmbeddedRegistry(Path(metadata_dir))

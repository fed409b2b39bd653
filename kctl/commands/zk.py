"""`kctl zk`: a read-only ZooKeeper shell for Kafka's layout — `ls`, `get` and `tree` of any znode,
and `brokers`, `topics` and `consumers` decoded into tables (or `--format json|jsonl`).

The command parses options and renders; reading and decoding is `kctl.zk.browse`. Nothing here
writes to ZooKeeper. Exit status: 0 success; 2 usage error; 3 the znode does not exist or ZooKeeper
cannot be reached.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import DEFAULT_FORMAT, FormatOption
from kctl.commands.output import Column, OutputFormat, render_documents, render_object, render_rows

if TYPE_CHECKING:
    from kctl.zk.browse import ZkBrowser

app = typer.Typer(
    help="Read Kafka's ZooKeeper layout: znodes, brokers, topics and ZooKeeper-mode consumer groups.",
    no_args_is_help=True,
)

ZooKeeperOption = Annotated[
    str,
    typer.Option(
        "--zookeeper",
        "-z",
        metavar="HOST:PORT[/CHROOT]",
        envvar="KCTL_ZOOKEEPER",
        help="The ZooKeeper ensemble (and chroot) to read.",
    ),
]
PathArgument = Annotated[str, typer.Argument(metavar="PATH", help="A znode path, e.g. /brokers/ids.")]
DEFAULT_ZOOKEEPER = "127.0.0.1:2181"


@contextlib.contextmanager
def _browser(zookeeper: str) -> Iterator[ZkBrowser]:
    from kctl.zk.browse import NoSuchZNodeError, ZkBrowser
    from kctl.zk.consumer_registry import ConsumerRegistry
    from kctl.zk.model import RegistryUnavailableError

    try:
        with ConsumerRegistry(zookeeper, session_timeout_ms=10_000) as registry:
            yield ZkBrowser(registry)
    except (RegistryUnavailableError, NoSuchZNodeError) as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None


def _cell(value: Any) -> str:
    """Decoded znode data in one table cell: JSON compactly, text as it is."""
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@app.command("ls")
def ls(
    path: PathArgument, fmt: FormatOption = DEFAULT_FORMAT, zookeeper: ZooKeeperOption = DEFAULT_ZOOKEEPER
) -> None:
    """List a znode's children: name, ephemeral owner (a session id, for ephemeral nodes), children
    count, data length and version."""
    with _browser(zookeeper) as zk:
        rows = zk.ls(path)
    columns = [
        Column("name"),
        Column("ephemeral_owner", "EPHEMERAL"),
        Column("children"),
        Column("data_length", "BYTES"),
        Column("version"),
    ]
    render_rows(
        rows, columns if fmt is OutputFormat.TABLE else [*columns, Column("path"), Column("mtime_ms")], fmt
    )


@app.command("get")
def get(
    path: PathArgument, fmt: FormatOption = DEFAULT_FORMAT, zookeeper: ZooKeeperOption = DEFAULT_ZOOKEEPER
) -> None:
    """Print a znode's data (decoded: JSON, text, or base64) and its stat."""
    with _browser(zookeeper) as zk:
        node = zk.get(path)
    if fmt is OutputFormat.TABLE:
        render_object({**node, "data": _cell(node["data"])}, fmt)
    else:
        render_object(node, fmt)


@app.command("tree")
def tree(
    path: Annotated[str, typer.Argument(metavar="PATH", help="Where to start (default: /).")] = "/",
    depth: Annotated[
        int | None, typer.Option("--depth", "-d", metavar="N", min=0, help="At most N levels below PATH.")
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    zookeeper: ZooKeeperOption = DEFAULT_ZOOKEEPER,
) -> None:
    """Print PATH and every znode below it, indented, with its data (ephemeral nodes marked `*`)."""
    with _browser(zookeeper) as zk:
        nodes = zk.tree(path, depth)
    if fmt is not OutputFormat.TABLE:
        render_documents(nodes, fmt)
        return
    for node in nodes:
        name = node["path"] if node["depth"] == 0 else node["path"].rsplit("/", 1)[1]
        mark = "*" if node["ephemeral_owner"] else ""
        data = "" if node["data"] is None else f" = {_cell(node['data'])}"
        typer.echo(f"{'  ' * node['depth']}{name}{mark}{data}")


@app.command("brokers")
def brokers(fmt: FormatOption = DEFAULT_FORMAT, zookeeper: ZooKeeperOption = DEFAULT_ZOOKEEPER) -> None:
    """The registered brokers (/brokers/ids), the controller marked."""
    with _browser(zookeeper) as zk:
        rows = zk.brokers()
    columns = [
        Column("broker_id", "ID"),
        Column("host"),
        Column("port"),
        Column("rack"),
        Column("controller"),
        Column("endpoints", formatter=" ".join),
        Column("session"),
    ]
    render_rows(rows, columns, fmt)


@app.command("topics")
def topics(fmt: FormatOption = DEFAULT_FORMAT, zookeeper: ZooKeeperOption = DEFAULT_ZOOKEEPER) -> None:
    """The topics (/brokers/topics): topic id, partitions, replication factor; json adds each
    partition's replicas, leader and ISR."""
    with _browser(zookeeper) as zk:
        rows = zk.topics()
    if fmt is not OutputFormat.TABLE:
        render_documents(rows, fmt)
        return
    render_rows(
        rows,
        [
            Column("topic"),
            Column("topic_id"),
            Column("partition_count", "PARTITIONS"),
            Column("replication_factor", "RF"),
        ],
        fmt,
    )


@app.command("consumers")
def consumers(fmt: FormatOption = DEFAULT_FORMAT, zookeeper: ZooKeeperOption = DEFAULT_ZOOKEEPER) -> None:
    """The ZooKeeper-mode consumer groups (/consumers): consumers, owned and committed partitions;
    json adds each consumer's subscription and partitions, and the committed offsets."""
    with _browser(zookeeper) as zk:
        rows = zk.consumers()
    if fmt is not OutputFormat.TABLE:
        render_documents(rows, fmt)
        return
    columns = [
        Column("group"),
        Column("consumer_count", "CONSUMERS"),
        Column("owned_partitions", "OWNED"),
        Column("committed_partitions", "COMMITTED"),
    ]
    render_rows(rows, columns, fmt)

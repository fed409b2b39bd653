"""`kctl cluster`: start, show and stop a local cluster (a real ZooKeeper and N brokers) under one
directory (the process management is kctl.localcluster.launcher), list the named clusters, and show
any running cluster at a glance (`info`: kctl.client.admin.overview)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    ClusterOptions,
    FormatOption,
    OverrideSyntaxError,
    cluster_options,
    parse_override,
)
from kctl.commands.output import (
    Column,
    OutputFormat,
    info,
    render_object,
    render_rows,
    warn,
)

app = typer.Typer(
    help=(
        "Start, show and stop a local cluster (a ZooKeeper server and N brokers on this machine); "
        "list the named clusters; show a running cluster's brokers and partitions (info)."
    ),
    no_args_is_help=True,
)

DirectoryOption = Annotated[
    Path,
    typer.Option(
        "--dir",
        "-d",
        metavar="DIR",
        file_okay=False,
        help="The cluster's directory: state file, ZooKeeper data, brokers' log dirs and logs.",
    ),
]
DEFAULT_DIRECTORY = Path("kctl-cluster")


def _broker_properties(values: list[str] | None) -> dict[str, str]:
    properties: dict[str, str] = {}
    for text in values or ():
        try:
            key, value = parse_override(text)
        except OverrideSyntaxError as error:
            raise KctlError(f"invalid -X: {error}", ExitCode.USAGE) from None
        if key in ("broker.id", "zookeeper.connect", "log.dirs", "log.dir", "listeners"):
            raise KctlError(f"-X {key} is set by `kctl cluster up` for each broker", ExitCode.USAGE)
        properties[key] = value
    return properties


@app.command("up")
def up(
    brokers: Annotated[
        int, typer.Option("--brokers", "-n", min=1, metavar="N", help="Number of brokers.")
    ] = 3,
    directory: DirectoryOption = DEFAULT_DIRECTORY,
    base_port: Annotated[
        int | None,
        typer.Option(
            "--base-port",
            metavar="P",
            min=1,
            max=65535,
            help="ZooKeeper on port P, broker i on P+i (default: the previous run's ports, else free ports).",
        ),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("-X", metavar="KEY=VALUE", help="A broker property for every broker (repeatable)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds to wait for every broker to register.")
    ] = 60.0,
) -> None:
    """Start a ZooKeeper server and N brokers (broker.id 1..N) in the background under DIR.

    ZooKeeper is the system's (Debian package `zookeeper`, with a Java runtime). Every broker has its
    own log dir (DIR/broker-ID/data, its log in DIR/broker-ID/data.log) and uses zookeeper.connect
    with the chroot /kctl. Waits until every broker is registered in ZooKeeper, then prints the
    bootstrap list (HOST:PORT,...) on stdout. Pids and ports are kept in DIR/cluster.json for `kctl
    cluster status` and `kctl cluster down`; starting a stopped cluster again reuses its ports and
    data. Exit status 1 if a process does not come up (what was started is stopped again)."""
    from kctl.localcluster import BrokerStartError, ZooKeeperStartError, ZooKeeperUnavailableError
    from kctl.localcluster.launcher import ClusterStartError, ClusterStateError
    from kctl.localcluster.launcher import up as start_cluster

    properties = _broker_properties(overrides)
    if base_port is not None and base_port + brokers > 65535:
        raise KctlError(f"--base-port {base_port} leaves no room for {brokers} brokers", ExitCode.USAGE)
    info(f"starting ZooKeeper and {brokers} broker{'s' if brokers > 1 else ''} in {directory}")
    try:
        state = start_cluster(directory, brokers, base_port=base_port, properties=properties, timeout=timeout)
    except ZooKeeperUnavailableError as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    except (ClusterStateError, ClusterStartError, ZooKeeperStartError, BrokerStartError) as error:
        raise KctlError(str(error)) from None
    print(state.bootstrap_servers, flush=True)
    info(
        f"cluster up: ZooKeeper {state.zookeeper_connect}, brokers "
        + ", ".join(f"{b.broker_id}={b.address}" for b in state.brokers)
        + f" (state in {Path(state.directory) / 'cluster.json'})"
    )


STATUS_COLUMNS = [
    Column("role"),
    Column("broker_id", "BROKER", formatter=lambda v: "-" if v is None else str(v)),
    Column("pid"),
    Column("address"),
    Column("alive", formatter=lambda a: "yes" if a else "no"),
    Column("controller", formatter=lambda c: "*" if c else ""),
    Column("log_file", "LOG"),
]


@app.command("status")
def status(directory: DirectoryOption = DEFAULT_DIRECTORY, fmt: FormatOption = DEFAULT_FORMAT) -> None:
    """Show the cluster's ZooKeeper and brokers: pid, address, alive, and which broker is the
    controller (*).

    Exit status 0 when every process is alive, 1 when some are not, 3 when DIR holds no cluster."""
    import dataclasses

    from kctl.localcluster.launcher import ClusterStateError
    from kctl.localcluster.launcher import status as cluster_status

    try:
        rows = cluster_status(directory)
    except ClusterStateError as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    render_rows([dataclasses.asdict(r) for r in rows], STATUS_COLUMNS, fmt)
    dead = [r for r in rows if not r.alive]
    if dead:
        names = ", ".join("zookeeper" if r.role == "zookeeper" else f"broker {r.broker_id}" for r in dead)
        warn(f"not running: {names}")
        raise typer.Exit(ExitCode.FAILURE)


@app.command("down")
def down(
    directory: DirectoryOption = DEFAULT_DIRECTORY,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds to wait for each process (then SIGKILL).")
    ] = 60.0,
) -> None:
    """Stop the cluster: each broker with SIGTERM, one at a time (a controlled shutdown: its
    leaderships move to the others first), then ZooKeeper; each is waited for.

    The directory stays (data, logs, cluster.json): `kctl cluster up --dir DIR` starts it again.
    Exit status 3 when DIR holds no cluster."""
    from kctl.localcluster.launcher import ClusterStateError
    from kctl.localcluster.launcher import down as stop_cluster

    try:
        stopped = stop_cluster(directory, timeout)
    except ClusterStateError as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    for process in stopped:
        what = "ZooKeeper" if process.role == "zookeeper" else f"broker {process.broker_id}"
        info(f"stopped {what} (pid {process.pid})")
    if not stopped:
        info(f"nothing was running in {directory}")


SENSITIVE_WORDS = ("password", "secret", "token", "key.pem", "keystore.key")
LIST_COLUMNS = [Column("name"), Column("bootstrap_servers", "BOOTSTRAP SERVERS"), Column("properties")]


def _shown(key: str, value: str) -> str:
    return "[hidden]" if any(word in key.lower() for word in SENSITIVE_WORDS) else value


@app.command("list")
def list_clusters(
    clusters_file: Annotated[
        Path | None,
        typer.Option(
            "--clusters",
            metavar="FILE",
            dir_okay=False,
            help="The clusters file (default: $KCTL_CLUSTERS, else ~/.config/kctl/clusters.toml).",
        ),
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
) -> None:
    """List the named clusters of the clusters file: name, bootstrap servers and client properties
    (values of keys naming a password, secret or token are hidden).

    A name works wherever a bootstrap list does: `kctl consume -b dc1 orders`, `kctl mirror --from
    dc1 --to agg`. The file is TOML, one table per cluster with `bootstrap.servers` and any client
    properties. Exit status 3 when a file given with --clusters or KCTL_CLUSTERS does not exist,
    2 when it is not valid."""
    from kctl.client.clusters_file import (
        ClustersFileError,
        ClustersFileNotFoundError,
        clusters_path,
        load_clusters,
    )

    try:
        loaded = load_clusters(clusters_file)
    except ClustersFileError as error:
        missing = isinstance(error, ClustersFileNotFoundError)
        raise KctlError(str(error), ExitCode.NOT_FOUND if missing else ExitCode.USAGE) from None
    if loaded.path is None:
        info(f"no clusters file at {clusters_path(None)[0]}")
    rows = [
        {
            "name": entry.name,
            "bootstrap_servers": entry.bootstrap_servers,
            "properties": {k: _shown(k, v) for k, v in sorted(entry.properties.items())}
            if fmt is not OutputFormat.TABLE
            else " ".join(f"{k}={_shown(k, v)}" for k, v in sorted(entry.properties.items())),
        }
        for entry in (loaded.clusters[name] for name in loaded.names())
    ]
    render_rows(rows, LIST_COLUMNS, fmt)


# -- info ------------------------------------------------------------------------------------------
INFO_BROKER_COLUMNS = [
    Column("broker_id", "ID"),
    Column("endpoint"),
    Column("rack", formatter=lambda r: r or "-"),
    Column("controller", formatter=lambda c: "*" if c else ""),
]
INFO_PARTITION_COLUMNS = [
    Column("topic"),
    Column("partition"),
    Column("leader", formatter=lambda v: str(v) if v >= 0 else "none"),
    Column("leader_epoch", "EPOCH"),
    Column("replicas", formatter=lambda v: ",".join(map(str, v)) or "-"),
    Column("isr", "ISR", formatter=lambda v: ",".join(map(str, v)) or "-"),
    Column("offline_replicas", "OFFLINE", formatter=lambda v: ",".join(map(str, v)) or "-"),
]


@app.command("info")
@cluster_options
def cluster_info(
    topics: Annotated[
        list[str] | None,
        typer.Option("--topic", "-t", metavar="TOPIC", help="Only this topic (repeatable; default: all)."),
    ] = None,
    internal: Annotated[
        bool, typer.Option("--internal", "-i", help="Include internal topics (e.g. __consumer_offsets).")
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Show a running cluster at a glance (kcat -L, rpk cluster info): its id, the controller, the
    live brokers (id, endpoint, rack) and every topic's partitions (leader, leader epoch, replicas,
    in-sync replicas, offline replicas).

    The table format prints the cluster, then a brokers table, then a partitions table; json/jsonl
    print one object {"cluster_id", "controller_id", "brokers": [...], "topics": [{"topic",
    "topic_id", "internal", "partitions": [...]}]}. Works against an embedded broker and a
    ZooKeeper cluster alike (DescribeCluster and Metadata). Exit status 3 when no broker can be
    reached or no named topic exists, 1 when only some do."""
    from kctl.client.admin.overview import cluster_overview
    from kctl.commands.clients import admin_session

    names = list(dict.fromkeys(topics or []))
    if internal and names:
        raise KctlError("--internal goes without --topic (named topics are shown either way)", ExitCode.USAGE)
    with admin_session(*cluster) as admin:
        overview, missing = cluster_overview(admin, names, include_internal=internal)
    document = overview.document()
    if fmt is OutputFormat.TABLE:
        render_object(
            {
                "cluster_id": overview.cluster_id,
                "controller": overview.controller_id if overview.controller_id >= 0 else "none",
                "brokers": len(overview.brokers),
                "topics": len(overview.topics),
                "partitions": sum(len(t.partitions) for t in overview.topics),
            },
            fmt,
            title="cluster",
        )
        sys.stdout.write("\n")
        render_rows(document["brokers"], INFO_BROKER_COLUMNS, fmt, title="brokers")
        sys.stdout.write("\n")
        partitions = [{"topic": t["topic"], **p} for t in document["topics"] for p in t["partitions"]]
        render_rows(partitions, INFO_PARTITION_COLUMNS, fmt, title="partitions")
    else:
        render_object(document, fmt)
    for topic in missing:
        detail = f": {topic.error_message}" if topic.error_message else ""
        warn(f"topic {topic.name!r}: {topic.error}{detail}")
    if missing:
        raise typer.Exit(ExitCode.NOT_FOUND if len(missing) == len(names) else ExitCode.FAILURE)

"""`kctl cluster`: bring up, start, stop, restart (one broker, all, or rolling), show and tear down a
local cluster (a real ZooKeeper and N brokers) under one directory (the process management is
kctl.localcluster: launcher, rolling), list the named clusters, and show any running cluster at a
glance (`info`: kctl.client.admin.overview). `up` and `start` make the cluster the current one
(kctl.client.current_cluster), `down` forgets it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
    progress,
    render_object,
    render_rows,
    warn,
)

if TYPE_CHECKING:
    from kctl.localcluster.launcher import StopReport
    from kctl.localcluster.state import ClusterState

app = typer.Typer(
    help=(
        "Start, stop, restart (also rolling) and show a local cluster (a ZooKeeper server and N "
        "brokers on this machine); list the named clusters; show a running cluster's brokers and "
        "partitions (info)."
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


BrokerIdsOption = Annotated[
    list[int] | None,
    typer.Option(
        "--broker", metavar="ID", min=1, help="Only this broker (repeatable; default: every broker)."
    ),
]


def _timeout_option(what: str) -> Any:
    return typer.Option("--timeout", min=1, metavar="SECONDS", help=what)


@contextlib.contextmanager
def _cluster_errors() -> Iterator[None]:
    """The local cluster's errors as KctlErrors: no cluster in DIR, no such broker, or no
    ZooKeeper installed exit 3; a process that does not come up exits 1."""
    from kctl.localcluster import BrokerStartError, ZooKeeperStartError, ZooKeeperUnavailableError
    from kctl.localcluster.launcher import ClusterStartError, ClusterStateError

    try:
        yield
    except (ZooKeeperUnavailableError, ClusterStateError) as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    except (ClusterStartError, ZooKeeperStartError, BrokerStartError) as error:
        raise KctlError(str(error)) from None


def _set_current(directory: Path, bootstrap_servers: str, command: str) -> None:
    from kctl.client.current_cluster import set_current_cluster

    try:
        set_current_cluster(directory, bootstrap_servers, command)
    except OSError as error:
        warn(f"cannot remember the cluster as the current one: {error}")
        return
    info(f"current cluster: {directory} (commands without -b talk to it until `kctl cluster down`)")


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
            help="ZooKeeper on port P, broker i on P+i, further ZooKeeper servers after the brokers "
            "(default: the previous run's ports, else free ports).",
        ),
    ] = None,
    zookeepers: Annotated[
        int,
        typer.Option(
            "--zookeepers",
            min=1,
            metavar="Z",
            help="ZooKeeper servers: 1, or an ensemble of Z in quorum mode (3 survives 1 failure, 5 two).",
        ),
    ] = 1,
    overrides: Annotated[
        list[str] | None,
        typer.Option("-X", metavar="KEY=VALUE", help="A broker property for every broker (repeatable)."),
    ] = None,
    racks: Annotated[
        str | None,
        typer.Option(
            "--racks",
            metavar="RACKS",
            help="Each broker's broker.rack: one per broker in id order (r0,r1,r2), or a name with "
            "{id} (RACK{id}: RACK1, RACK2, ...).",
        ),
    ] = None,
    timeout: Annotated[float, _timeout_option("Seconds to wait for every broker to register.")] = 60.0,
) -> None:
    """Start a ZooKeeper server (or an ensemble of --zookeepers Z) and N brokers (broker.id 1..N) in
    the background under DIR.

    ZooKeeper is the system's (Debian package `zookeeper`, with a Java runtime); an ensemble's servers
    run in quorum mode on 127.0.0.1, each with its data in DIR/zookeeper/zk-ID. Every broker has its
    own log dir (DIR/broker-ID/data, its log in DIR/broker-ID/data.log) and uses zookeeper.connect
    with the chroot /kctl. --racks gives each broker its own broker.rack (rack-aware replica
    placement; with -X replica.selector.class=rack-aware, consumers with a client.rack fetch from the
    replica in their rack, KIP-392). Waits until every broker is registered in ZooKeeper, then prints the
    bootstrap list (HOST:PORT,...) on stdout. Ports, pids and the -X properties are kept in
    DIR/cluster.json for the other `kctl cluster` commands; starting a stopped cluster again reuses
    its ports and data. The cluster becomes the current one: commands given no -b (and no
    KCTL_BOOTSTRAP_SERVER, -X bootstrap.servers or --config setting it) talk to it until `kctl
    cluster down`. Refused (exit 1) while a process of DIR's cluster runs (`kctl cluster start`
    starts its stopped brokers). Exit status 1 if a process does not come up (what was started is
    stopped again), 3 without ZooKeeper or Java installed."""
    from kctl.localcluster.launcher import ClusterStateError, broker_racks, refuse_if_running
    from kctl.localcluster.launcher import up as start_cluster

    properties = _broker_properties(overrides)
    rack_of: dict[int, str] = {}
    if racks is not None:
        if "broker.rack" in properties:
            raise KctlError("--racks and -X broker.rack: give the racks one way", ExitCode.USAGE)
        try:
            rack_of = broker_racks(racks, brokers)
        except ValueError as error:
            raise KctlError(str(error), ExitCode.USAGE) from None
    if zookeepers % 2 == 0:
        warn(f"--zookeepers {zookeepers}: an even ensemble survives no more failures than {zookeepers - 1}")
    if base_port is not None and base_port + brokers + zookeepers - 1 > 65535:
        raise KctlError(f"--base-port {base_port} leaves no room for {brokers} brokers", ExitCode.USAGE)
    with _cluster_errors():
        try:
            refuse_if_running(directory)  # before saying what it would start
            servers = "ZooKeeper" if zookeepers == 1 else f"a ZooKeeper ensemble of {zookeepers}"
            info(f"starting {servers} and {brokers} broker{'s' if brokers > 1 else ''} in {directory}")
            state = start_cluster(
                directory,
                brokers,
                base_port=base_port,
                properties=properties,
                timeout=timeout,
                zookeepers=zookeepers,
                racks=rack_of,
            )
        except ClusterStateError as error:  # running, or a damaged cluster.json: not a missing cluster
            raise KctlError(str(error)) from None
    print(state.bootstrap_servers, flush=True)
    info(
        f"cluster up: ZooKeeper {state.zookeeper_connect}, brokers "
        + ", ".join(f"{b.broker_id}={b.address}" for b in state.brokers)
        + f" (state in {Path(state.directory) / 'cluster.json'})"
    )
    _set_current(Path(state.directory), state.bootstrap_servers, "kctl cluster up")


STATUS_COLUMNS = [
    Column("role"),
    Column("broker_id", "BROKER", formatter=lambda v: "-" if v is None else str(v)),
    Column("server_id", "ZK_ID", formatter=lambda v: "-" if v is None else str(v)),
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

    A broker is found by what runs — the process holding its log dir's lock, the pid file `kctl
    broker start` writes there — so one restarted by hand shows with its real pid (written back to
    cluster.json); one not running shows its last pid. Exit status 0 when every process is alive,
    1 when some are not, 3 when DIR holds no cluster."""
    import dataclasses

    from kctl.localcluster.launcher import status as cluster_status

    with _cluster_errors():
        rows = cluster_status(directory)
    render_rows([dataclasses.asdict(r) for r in rows], STATUS_COLUMNS, fmt)
    dead = [r for r in rows if not r.alive]
    if dead:
        names = ", ".join(r.name for r in dead)
        warn(f"not running: {names}")
        raise typer.Exit(ExitCode.FAILURE)


@app.command("start")
def start(
    broker_ids: BrokerIdsOption = None,
    directory: DirectoryOption = DEFAULT_DIRECTORY,
    timeout: Annotated[
        float, _timeout_option("Seconds to wait for each process to start and the brokers to register.")
    ] = 60.0,
) -> None:
    """Start what of the cluster in DIR does not run, with the configuration `kctl cluster up`
    recorded (ports, -X properties): ZooKeeper when it is stopped, then every stopped broker (with
    --broker, those only); wait until they are registered.

    Prints the bootstrap list on stdout, as `up` does, and makes the cluster the current one.
    Nothing running is touched: after `kctl cluster stop` or `down`, this starts the whole cluster.
    A broker killed uncleanly is still registered in ZooKeeper until its session expires: its
    start waits for that (said on stderr).
    Exit status 0 also when everything was running already; 1 if a process does not come up (what
    this command started is stopped again); 3 when DIR holds no cluster or no such broker."""
    from kctl.localcluster.launcher import start as start_processes

    with _cluster_errors():
        report = start_processes(directory, broker_ids, timeout, info)
    for process in report.started:
        info(f"started {process.name} (pid {process.pid}, {process.address})")
    if not report.started:
        info(f"already running: {', '.join(report.already_running)}")
    print(report.state.bootstrap_servers, flush=True)
    _set_current(Path(report.state.directory), report.state.bootstrap_servers, "kctl cluster start")


def _report_stop(report: StopReport, directory: Path) -> None:
    """The stop report on stderr; exit 1 naming what could not be stopped."""
    for process in report.stopped:
        killed = " (SIGKILL: it did not exit in time after SIGTERM)" if process.name in report.killed else ""
        info(f"stopped {process.name} (pid {process.pid}){killed}")
    if not report.stopped and not report.failed:
        info(f"nothing was running in {directory}")
    for failure in report.failed:
        warn(f"could not stop {failure}")
    if report.failed:
        raise KctlError("not stopped: " + ", ".join(f.name for f in report.failed))


@app.command("stop")
def stop(
    broker_ids: BrokerIdsOption = None,
    directory: DirectoryOption = DEFAULT_DIRECTORY,
    timeout: Annotated[float, _timeout_option("Seconds to wait for each broker to exit.")] = 60.0,
) -> None:
    """Stop brokers of the cluster in DIR with SIGTERM (a controlled shutdown: their leaderships
    move to the other brokers first), one at a time, the controller last, waiting for each process
    to exit; without --broker every broker, then ZooKeeper.

    Brokers are found by what runs (see `status`), also when started by hand. Nothing is killed: a
    broker still running after --timeout is reported, and ZooKeeper is then left running. The
    cluster stays the current one (`kctl cluster start` brings it back). Exit status 1 when a
    process could not be stopped, 3 when DIR holds no cluster or no such broker."""
    from kctl.localcluster.launcher import stop as stop_processes

    with _cluster_errors():
        report = stop_processes(directory, broker_ids, timeout)
    _report_stop(report, directory)


RESTART_COLUMNS = [
    Column("broker_id", "BROKER"),
    Column("old_pid", "OLD PID", formatter=lambda v: "-" if v is None else str(v)),
    Column("new_pid", "NEW PID"),
    Column("seconds", formatter=lambda v: f"{v:.1f}"),
]


@app.command("restart")
def restart(
    broker_ids: BrokerIdsOption = None,
    rolling: Annotated[
        bool,
        typer.Option(
            "--rolling",
            help="One broker at a time, the controller last, each waited for until the cluster is healthy.",
        ),
    ] = False,
    directory: DirectoryOption = DEFAULT_DIRECTORY,
    timeout: Annotated[
        float,
        _timeout_option(
            "Seconds each step may take: a broker's exit, its start, its registration, the ISRs filling up."
        ),
    ] = 60.0,
    fmt: FormatOption = DEFAULT_FORMAT,
) -> None:
    """Restart brokers of the cluster in DIR with their recorded configuration: stop them (SIGTERM,
    a controlled shutdown, waiting for each to exit), then start them again; prints one row per
    broker restarted (broker, old pid, new pid, seconds).

    With --rolling, every broker in turn, as operators upgrade a Kafka cluster: a controlled
    shutdown, a start, then wait until it is registered again and no partition is under-replicated
    (every partition has a leader and all its replicas in its ISR, in ZooKeeper's partition states
    and in the brokers' metadata) before the next one; the controller goes last. Progress on
    stderr. The cluster must be healthy first. Exit status 1 when a step does not finish within
    --timeout (the message names the broker and what was waited for; the brokers after it are not
    touched), 2 for --rolling with --broker, 3 when DIR holds no cluster or no such broker."""
    if rolling and broker_ids:
        raise KctlError("--rolling restarts every broker: give it without --broker", ExitCode.USAGE)
    rows = _rolling_restart(directory, timeout) if rolling else _restart(directory, broker_ids, timeout)
    render_rows(rows, RESTART_COLUMNS, fmt)


def _restart(directory: Path, broker_ids: list[int] | None, timeout: float) -> list[dict[str, object]]:
    import time

    from kctl.localcluster.launcher import restart as restart_processes

    began = time.monotonic()
    with _cluster_errors():
        stopped, started = restart_processes(directory, broker_ids, timeout, info)
    if started is None:
        _report_stop(stopped, directory)  # raises: something could not be stopped
    assert started is not None
    old = {p.broker_id: p.pid for p in stopped.stopped}
    for process in started.started:
        info(f"started {process.name} (pid {process.pid}, {process.address})")
    seconds = time.monotonic() - began
    return [
        _restart_row(p.broker_id, old.get(p.broker_id), p.pid, seconds)
        for p in started.started
        if p.broker_id is not None
    ]


def _restart_row(broker_id: int, old_pid: int | None, new_pid: int, seconds: float) -> dict[str, object]:
    return {"broker_id": broker_id, "old_pid": old_pid, "new_pid": new_pid, "seconds": round(seconds, 3)}


def _rolling_restart(directory: Path, timeout: float) -> list[dict[str, object]]:
    from rich.progress import MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn

    from kctl.localcluster.launcher import load_state
    from kctl.localcluster.rolling import RollingRestartError, rolling_restart

    with _cluster_errors():
        size = len(load_state(directory).brokers)
    seen: list[int] = []
    with progress(
        SpinnerColumn(), TextColumn("{task.description}"), MofNCompleteColumn(), TimeElapsedColumn()
    ) as bar:
        task = bar.add_task("rolling restart", total=size)

        def on_step(broker_id: int | None, what: str) -> None:
            if broker_id is not None and broker_id not in seen:
                seen.append(broker_id)
            label = f"broker {broker_id}: {what}" if broker_id is not None else what
            info(label)
            bar.update(task, description=label, completed=max(len(seen) - 1, 0))

        try:
            with _cluster_errors():
                restarted = rolling_restart(
                    directory, health=_metadata_health, timeout=timeout, on_step=on_step
                )
        except RollingRestartError as error:
            raise KctlError(str(error)) from None
        bar.update(task, completed=size)
    info(f"rolling restart done: {len(restarted)} brokers restarted, no partition under-replicated")
    return [_restart_row(r.broker_id, r.old_pid, r.new_pid, r.seconds) for r in restarted]


def _metadata_health(state: ClusterState) -> str | None:
    """None when every broker of ``state`` is in the cluster's metadata and every partition has a
    leader and all its replicas in sync; else what is not (one line)."""
    from kctl.client import AdminClient, KafkaError

    try:
        with AdminClient(state.bootstrap_servers, request_timeout_ms=5000) as admin:
            brokers = {b.node_id for b in admin.describe_cluster(timeout=10).brokers}
            topics = admin.list_topics(include_internal=True, timeout=10)
    except KafkaError as error:
        return f"the brokers' metadata could not be read: {error}"
    missing = sorted({b.broker_id for b in state.brokers if b.broker_id is not None} - brokers)
    if missing:
        return f"broker {', '.join(map(str, missing))} not in the cluster's metadata"
    lagging = [
        f"{t.name}-{p.partition} (leader {p.leader}, replicas {_ids(p.replicas)}, isr {_ids(p.isr)})"
        for t in topics
        for p in t.partitions
        if p.leader < 0 or set(p.isr) != set(p.replicas)
    ]
    if lagging:
        more = f" and {len(lagging) - 3} more" if len(lagging) > 3 else ""
        return f"{len(lagging)} partitions under-replicated or offline: {', '.join(lagging[:3])}{more}"
    return None


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) or "-"


@app.command("down")
def down(
    directory: DirectoryOption = DEFAULT_DIRECTORY,
    timeout: Annotated[float, _timeout_option("Seconds to wait for each process (then SIGKILL).")] = 60.0,
) -> None:
    """Stop the cluster: each broker with SIGTERM, one at a time, the controller last (a controlled
    shutdown: its leaderships move to the others first), then ZooKeeper; each is waited for.

    Every broker of the cluster is stopped, found by what runs (see `status`), also one restarted
    by hand. A broker that cannot be stopped — or whose address still answers as a Kafka broker
    although no process of it was found — is named, ZooKeeper is left running (the brokers still
    up would hang without it), and the exit status is 1. The directory stays (data, logs,
    cluster.json): `kctl cluster start --dir DIR` starts it again. The cluster stops being the
    current one. Exit status 3 when DIR holds no cluster."""
    from kctl.client.current_cluster import clear_current_cluster
    from kctl.localcluster.launcher import down as stop_cluster

    with _cluster_errors():
        report = stop_cluster(directory, timeout)
    _report_stop(report, directory)
    with contextlib.suppress(OSError):
        if clear_current_cluster(directory):
            info(f"{directory.resolve()} is no longer the current cluster")


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


@app.command("health")
@cluster_options
def cluster_health_command(
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", "-w", help="Ask again every second until the cluster is healthy (or --timeout)."
        ),
    ] = False,
    timeout: Annotated[float, _timeout_option("With --watch: seconds to wait for a healthy cluster.")] = 60.0,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Say whether a running cluster is healthy (as rpk cluster health), and why not: no controller,
    brokers down (named as replicas but not alive), leaderless partitions, under-replicated partitions
    (internal topics included).

    Prints the verdict with its reasons and the partitions concerned; json/jsonl print one object
    {"healthy", "unhealthy_reasons", "controller_id", "live_brokers", "brokers_down",
    "leaderless_partitions", "under_replicated_partitions"}. With --watch it asks every second,
    reporting each change on stderr, until the cluster is healthy or --timeout passes. Exit status 0
    when healthy, 1 when not, 3 when no broker can be reached."""
    import time

    from kctl.client.admin.health import cluster_health
    from kctl.commands.clients import admin_session

    deadline = time.monotonic() + timeout
    with admin_session(*cluster) as admin:
        health = cluster_health(admin)
        said = health.reasons
        while watch and not health.healthy and time.monotonic() < deadline:
            if said:
                info(f"unhealthy: {'; '.join(said)}")
            time.sleep(1.0)  # the watch's polling interval, bounded by --timeout
            with contextlib.suppress(Exception):  # a broker going or coming back: ask again
                health = cluster_health(admin)
            said = health.reasons if health.reasons != said else []
    document = health.document()
    if fmt is OutputFormat.TABLE:
        render_object(
            {
                key: (", ".join(map(str, value)) or "-") if isinstance(value, list) else value
                for key, value in document.items()
            },
            fmt,
            title="cluster health",
        )
    else:
        render_object(document, fmt)
    if not health.healthy:
        warn(f"unhealthy: {'; '.join(health.reasons)}")
        raise typer.Exit(ExitCode.FAILURE)

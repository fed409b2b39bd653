"""`kctl broker`: run a broker in the foreground or as a daemon, stop it, list the brokers of a running
cluster, show their log dirs and move replicas between a broker's log dirs."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    BytesOption,
    ClusterOptions,
    ConfigFileOption,
    ConfigOverrideOption,
    FormatOption,
    cluster_options,
    load_config,
)
from kctl.commands.output import Column, OutputFormat, info, render_documents, render_rows, warn

app = typer.Typer(
    help="Run and stop a kctl broker; list the brokers, show their log dirs and move replicas between them.",
    no_args_is_help=True,
)

PID_FILE_NAME = "kctl-broker.pid"
PidFileOption = Annotated[
    Path | None,
    typer.Option("--pid-file", metavar="FILE", help="Pid file (default: `FIRST_LOG_DIR/kctl-broker.pid`)."),
]


def _broker_config(config_file: Path | None, overrides: list[str] | None):
    from kctl.broker.config import BrokerConfig, BrokerConfigError

    resolved = load_config(config_file, overrides)
    try:
        config = BrokerConfig(dict(resolved))
    except BrokerConfigError as error:
        raise KctlError(f"invalid broker configuration: {error}", ExitCode.USAGE) from None
    for name in config.ignored:
        warn(f"ignoring unknown broker property {name!r}")
    return config


def _default_pid_file(config_file: Path | None, overrides: list[str] | None) -> Path:
    config = _broker_config(config_file, overrides)
    return Path(config.log_dirs[0]) / PID_FILE_NAME


def _setup_logging(config: Any, level: str | None, log_file: Path | None) -> None:
    from kctl.broker.log_setup import setup_logging

    setup_logging(config, log_file, level)


async def _run(config, on_ready: Callable[[str], None] | None) -> None:
    import asyncio

    from kctl.broker.broker import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    await broker.start()
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    address = ",".join(broker.bootstrap_addresses)
    if on_ready is not None:
        on_ready(address)
    else:
        print(address, flush=True)
        if broker.metrics.url is not None:  # the second line, when metrics are served
            print(broker.metrics.url, flush=True)
        # a line of the broker's log (its format: text or JSON), not a diagnostic of the command
        logging.getLogger("kctl.broker").info(
            "broker %d ready on %s (Ctrl-C or SIGTERM to stop)", config.broker_id, address
        )
    await stopping.wait()
    logging.getLogger("kctl.broker").info("stopping: flushing logs and writing checkpoints")
    await broker.stop()


@app.command("start")
def start(
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    daemon: Annotated[
        bool, typer.Option("--daemon", "-d", help="Run in the background; print the address and exit.")
    ] = False,
    pid_file: PidFileOption = None,
    log_file: Annotated[
        Path | None,
        typer.Option(
            "--log-file",
            metavar="FILE",
            help="Write the broker log here (default: stderr; with --daemon: `LOG_DIR/kctl-broker.log`).",
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            help="DEBUG, INFO, WARNING or ERROR: the root logger's level (default: the log.level property, "
            "INFO; log.level.LOGGER=LEVEL sets one logger's).",
        ),
    ] = None,
    processes: Annotated[
        str | None,
        typer.Option(
            "--processes",
            metavar="N|auto",
            help="Use the whole machine: run N broker processes (auto: one per usable core) under one "
            "supervisor, which restarts a child that dies and stops them all on SIGTERM/Ctrl-C. Needs "
            "zookeeper.connect. Child i (from 0) gets broker.id ID+i, every listener and metrics port "
            "PORT+i (0 stays 0), log dirs DIR/broker-(ID+i) and, unless set, broker.rack = the host name.",
        ),
    ] = None,
) -> None:
    """Start a broker with Kafka's broker properties (server.properties and -X).

    Defaults: listeners=PLAINTEXT://127.0.0.1:9092, log.dirs=./data, embedded metadata (no ZooKeeper;
    set zookeeper.connect to use one). Prints the bootstrap address on stdout once it accepts
    connections. SIGTERM or Ctrl-C stops it cleanly (logs flushed, checkpoints written); after an unclean
    stop the next start recovers the logs.

    With --processes N: N brokers on this host from this one configuration (see --processes), in the
    foreground; their bootstrap addresses are printed on one line once all listen."""
    config = _broker_config(config_file, overrides)
    if log_level is not None and log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise KctlError(f"unknown log level {log_level!r}", ExitCode.USAGE)
    log_dir = Path(config.log_dirs[0])
    log_dir.mkdir(parents=True, exist_ok=True)
    pid_path = pid_file or log_dir / PID_FILE_NAME
    _refuse_if_running(pid_path, log_dir)
    if processes is not None:
        _start_processes(config, processes, daemon, pid_path, log_file, log_level, config_file, overrides)
        return
    if daemon:
        _start_daemon(config, pid_path, log_file or log_dir / "kctl-broker.log", log_level)
        return
    _setup_logging(config, log_level, log_file)
    pid_path.write_text(f"{os.getpid()}\n")
    import asyncio  # here: only a running broker needs it (`kctl broker --help` starts without it)

    try:
        asyncio.run(_run(config, None))
    except Exception as error:
        failure = _start_failure(error, config)
        if failure is None:
            raise
        raise failure from None
    finally:
        _remove_own_pid_file(pid_path)


def _start_processes(
    config, processes: str, daemon: bool, pid_path: Path, log_file, log_level, *files
) -> None:
    """`--processes`: the supervisor (kctl.localcluster.supervisor) in the foreground, its pid in the
    pid file (`kctl broker stop` with the same configuration stops every child through it)."""
    from kctl.localcluster.supervisor import Supervisor, process_count

    try:
        count = process_count(processes, config.zookeeper_connect, daemon)
    except ValueError as error:
        raise KctlError(str(error), ExitCode.USAGE) from None
    _setup_logging(config, log_level, log_file)
    pid_path.write_text(f"{os.getpid()}\n")
    try:
        status = Supervisor(dict(load_config(*files)), count).run()
    finally:
        _remove_own_pid_file(pid_path)
    if status:
        raise typer.Exit(status)


_START_ERRORS = (
    "LogDirLockedError",
    "InconsistentMetadataError",
    "BrokerIdInUseError",
    "RegistryUnavailableError",
    "RegistryError",  # e.g. the embedded metadata held by another broker on this directory
)


def _start_failure(error: BaseException, config: Any) -> KctlError | None:
    """Why a broker did not start, in one line, with the exit status: the same in the foreground
    and from a daemon. None for an unexpected error (a bug: its traceback is wanted)."""
    import socket

    name = type(error).__name__
    if name == "SecurityConfigError":  # e.g. a listener whose name no security protocol maps
        return KctlError(f"invalid broker configuration: {error}", ExitCode.USAGE)
    if isinstance(error, socket.gaierror):
        hosts = ", ".join(str(listener) for listener in config.listeners)
        reason = f"cannot resolve a listener's host ({hosts}): {error.strerror}"
        return KctlError(f"cannot start the broker: {reason}")
    if isinstance(error, OSError):
        return KctlError(f"cannot start the broker: {error.strerror or error}")
    if name in _START_ERRORS:
        return KctlError(str(error))
    return None


def _running_pid(pid_path: Path) -> int | None:
    """The pid in ``pid_path`` if that process is alive, is not this one and wrote the file (not a
    process that reused a killed broker's pid: ``kctl.common.pidfile``), else None."""
    from kctl.common.pidfile import pid_file_owner

    return pid_file_owner(pid_path)


def _refuse_if_running(pid_path: Path, log_dir: Path) -> None:
    """A second broker on a data directory in use is refused before it touches anything (the
    running broker's pid file included)."""
    pid = _running_pid(pid_path)
    if pid is not None:
        raise KctlError(f"a broker is already running on {log_dir} (pid {pid}, pid file {pid_path})")


def _remove_own_pid_file(pid_path: Path) -> None:
    with contextlib.suppress(FileNotFoundError, ValueError):
        if pid_path.read_text().strip() == str(os.getpid()):
            pid_path.unlink()


FAILED_PREFIX = "failed "
"""How the daemon tells the parent on their pipe that it did not start: ``failed <exit code> <reason>``
(a ready daemon writes its address instead)."""


def _start_daemon(config, pid_path: Path, log_file: Path, log_level: str | None) -> None:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the daemon
        os.close(read_fd)
        os._exit(_daemon(config, pid_path, log_file, log_level, write_fd))
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        line = ready.readline().decode(errors="replace").strip()
    if not line or line.startswith(FAILED_PREFIX):
        os.waitpid(pid, 0)
        code, _, reason = line.removeprefix(FAILED_PREFIX).partition(" ")
        if not reason:
            raise KctlError(f"the broker did not start (see {log_file})")
        raise KctlError(reason, ExitCode(int(code)) if code.isdigit() else ExitCode.FAILURE)
    print(line, flush=True)
    info(
        f"broker {config.broker_id} running in the background "
        f"(pid {pid}, log {log_file}, pid file {pid_path})"
    )


def _daemon(config, pid_path: Path, log_file: Path, log_level: str | None, ready_fd: int) -> int:
    """The daemon's life (in the forked child): the broker until it stops; its exit status. A
    broker that does not start says why in one line, in its log and on the pipe to the parent."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    log = logging.getLogger("kctl.broker")
    ready = False

    def tell_parent(line: str) -> None:
        nonlocal ready
        with contextlib.suppress(OSError):  # the parent is gone: nobody to tell
            os.write(ready_fd, (line + "\n").encode())
        os.close(ready_fd)
        ready = True

    try:
        _setup_logging(config, log_level, log_file)
        pid_path.write_text(f"{os.getpid()}\n")
        import asyncio

        asyncio.run(_run(config, tell_parent))
    except BaseException as error:
        failure = _start_failure(error, config) if isinstance(error, Exception) and not ready else None
        if failure is not None:
            log.error("%s", failure)  # the reason, not a traceback: nothing in kctl went wrong
        else:
            log.exception("the broker failed")
            what = f"unexpected {type(error).__name__}: {error}"
            failure = KctlError(f"the broker did not start: {what} (traceback in {log_file})")
        if not ready:
            tell_parent(f"{FAILED_PREFIX}{int(failure.exit_code)} {failure}")
        return 1
    finally:
        _remove_own_pid_file(pid_path)
    return 0


@app.command("stop")
def stop(
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    pid_file: PidFileOption = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for a clean stop.")
    ] = 60.0,
) -> None:
    """Stop a broker started with --daemon (SIGTERM, then wait for it to exit).

    Exit status 0 when it stopped, 3 when no broker is running for the pid file, 1 on timeout."""
    path = pid_file or _default_pid_file(config_file, overrides)
    try:
        recorded = int(path.read_text().strip())
    except FileNotFoundError:
        raise KctlError(f"no pid file at {path}: is a broker running?", ExitCode.NOT_FOUND) from None
    except ValueError:
        raise KctlError(f"pid file {path} does not hold a pid") from None
    pid = _running_pid(path)  # never signal a process that reused a killed broker's pid
    if pid is None:
        path.unlink(missing_ok=True)
        raise KctlError(f"no process {recorded} (stale pid file {path} removed)", ExitCode.NOT_FOUND)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        path.unlink(missing_ok=True)
        raise KctlError(f"no process {pid} (stale pid file {path} removed)", ExitCode.NOT_FOUND) from None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            info(f"broker (pid {pid}) stopped")
            return
        time.sleep(0.05)
    raise KctlError(f"broker (pid {pid}) did not stop within {timeout:g} s")


# -- log-dirs --------------------------------------------------------------------------------------
LOG_DIR_COLUMNS = [
    Column("broker"),
    Column("log_dir", "LOG-DIR"),
    Column("error", formatter=lambda e: e or "-"),
    Column("replica_count", "REPLICAS"),
    Column("size", "SIZE", size=True),
    Column("usable_bytes", "USABLE", size=True),
    Column("total_bytes", "TOTAL", size=True),
]
REPLICA_COLUMNS = [
    Column("broker"),
    Column("log_dir", "LOG-DIR"),
    Column("topic"),
    Column("partition"),
    Column("size", "SIZE", size=True),
    Column("offset_lag", "OFFSET-LAG"),
    Column("is_future", "FUTURE", formatter=lambda f: "yes" if f else "no"),
]


log_dirs_app = typer.Typer(
    help="Show the brokers' log dirs (the default), or move replicas between a broker's log dirs.",
)
app.add_typer(log_dirs_app, name="log-dirs")

BrokersOption = Annotated[
    list[int] | None,
    typer.Option("--broker", metavar="ID", help="Ask only this broker (repeatable; default: all)."),
]
LogDirTopicsOption = Annotated[
    list[str] | None,
    typer.Option("--topic", "-t", metavar="TOPIC", help="Only this topic's partitions (repeatable)."),
]


@log_dirs_app.callback(invoke_without_command=True)
@cluster_options
def log_dirs(
    ctx: typer.Context,
    brokers: BrokersOption = None,
    topics: LogDirTopicsOption = None,
    exact_bytes: BytesOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Show the brokers' log directories (as `log-dirs describe`), or run a subcommand."""
    if ctx.invoked_subcommand is None:
        _describe_log_dirs(brokers, topics, exact_bytes, fmt, cluster)


@log_dirs_app.command("describe")
@cluster_options
def describe_log_dirs(
    brokers: BrokersOption = None,
    topics: LogDirTopicsOption = None,
    exact_bytes: BytesOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Show the brokers' log directories: the partition replicas in each, their size on disk and the
    volume's usable and total bytes (Kafka's DescribeLogDirs, as kafka-log-dirs.sh --describe).

    Talks to a running cluster (-b); --config/-X take client properties here. The table format
    prints a log-dirs table, then a replicas table; json/jsonl print one object per log dir with
    its "replicas" nested (a replica being moved there shows as a future one). Sizes are
    human-readable in tables (exact bytes with --bytes and in JSON). A broker that does not answer
    (killed or hung) is waited for at most request.timeout.ms: it gets one row without a log dir
    and with error NETWORK_EXCEPTION (REQUEST_TIMED_OUT), stderr names it, and the others are shown.
    Exit status 1 if a log dir is offline or a broker did not answer, 3 if no named topic exists or
    no --broker named is in the cluster."""
    _describe_log_dirs(brokers, topics, exact_bytes, fmt, cluster)


def _describe_log_dirs(
    brokers: list[int] | None,
    topics: list[str] | None,
    exact_bytes: bool,
    fmt: OutputFormat,
    cluster: ClusterOptions,
) -> None:
    from kctl.client import TopicPartition
    from kctl.commands.clients import admin_session

    with admin_session(*cluster) as admin:
        wanted: list[TopicPartition] | None = None
        missing_topics: list[str] = []
        if topics:
            described = admin.describe_topics(list(dict.fromkeys(topics)))
            for missing in (t for t in described if not t.ok):
                warn(f"topic {missing.name!r}: {missing.error}")
                missing_topics.append(missing.name)
            if not any(t.ok for t in described):
                raise KctlError("none of the named topics exists", ExitCode.NOT_FOUND)
            wanted = [TopicPartition(t.name, p.partition) for t in described if t.ok for p in t.partitions]
        answers = admin.log_dirs_by_broker(brokers, wanted)
        silent = admin.cluster.not_answering()
    failed = {broker_id: a.error for broker_id, a in answers.items() if a.error is not None}
    if brokers and all(_absent(failed.get(b)) for b in brokers):
        raise KctlError("; ".join(str(failed[b]) for b in sorted(set(brokers))), ExitCode.NOT_FOUND)
    documents = []
    for broker_id, answer in answers.items():
        if answer.error is not None:
            documents.append(_log_dir_document(broker_id, None, answer.error))
        documents += [_log_dir_document(broker_id, d, None) for d in answer.log_dirs]
    if fmt is OutputFormat.TABLE:
        render_rows(documents, LOG_DIR_COLUMNS, fmt, title="log dirs", exact_sizes=exact_bytes)
        sys.stdout.write("\n")
        rows = [
            {"broker": d["broker"], "log_dir": d["log_dir"], **r} for d in documents for r in d["replicas"]
        ]
        render_rows(rows, REPLICA_COLUMNS, fmt, title="replicas", exact_sizes=exact_bytes)
    else:
        render_documents(documents, fmt)
    for broker_id, error in failed.items():
        if broker_id in silent:
            warn(f"broker {broker_id} did not answer ({silent[broker_id]}): its log dirs are unknown")
        else:
            warn(f"broker {broker_id}: {error}")
    offline = [
        f"broker {d['broker']} log dir {d['log_dir']}: {d['error']}"
        for d in documents
        if d["error"] and d["log_dir"] is not None
    ]
    if offline:
        raise KctlError("; ".join(offline))
    if failed:
        raise typer.Exit(ExitCode.FAILURE)
    if missing_topics:
        raise KctlError(f"no such topic: {', '.join(missing_topics)}", ExitCode.FAILURE)


def _absent(error: Any) -> bool:
    """Whether a broker's log-dirs error says it is not in the cluster."""
    from kctl.client import BrokerResponseError
    from kctl.protocol import ErrorCode

    return isinstance(error, BrokerResponseError) and error.code == ErrorCode.BROKER_NOT_AVAILABLE


def _log_dir_document(broker_id: int, d: Any, error: Any) -> dict[str, Any]:
    """One log dir of a broker as plain data; a broker that gave none (``error``) is one row with
    no log dir and Kafka's name for its error (NETWORK_EXCEPTION: it did not answer)."""
    from kctl.client.leader_requests import error_code_of
    from kctl.protocol.errors import error_name

    if d is None:
        return {
            "broker": broker_id,
            "log_dir": None,
            "error": error_name(error_code_of(error)),
            "replica_count": None,
            "size": None,
            "usable_bytes": None,
            "total_bytes": None,
            "replicas": [],
        }
    return {
        "broker": broker_id,
        "log_dir": d.path,
        "error": d.error,
        "replica_count": len(d.replicas),
        "size": d.size,
        "usable_bytes": d.usable_bytes,
        "total_bytes": d.total_bytes,
        "replicas": [
            {
                "topic": r.topic_partition.topic,
                "partition": r.topic_partition.partition,
                "size": r.size,
                "offset_lag": r.offset_lag,
                "is_future": r.is_future,
            }
            for r in d.replicas
        ],
    }


MOVE_COLUMNS = ["broker", "topic", "partition", "from", "to", "status"]


@log_dirs_app.command("move")
@cluster_options
def move_log_dirs(
    broker: Annotated[int, typer.Option("--broker", metavar="ID", help="The broker hosting the replicas.")],
    topic: Annotated[str, typer.Option("--topic", "-t", metavar="TOPIC", help="The topic.")],
    to: Annotated[
        str, typer.Option("--to", metavar="DIR", help="The destination: one of the broker's log dirs.")
    ],
    partitions: Annotated[
        list[int] | None,
        typer.Option("--partition", "-p", help="A partition (repeatable; default: every one on the broker)."),
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Start the moves (without it, only the plan).")
    ] = False,
    wait: Annotated[
        float,
        typer.Option("--wait", metavar="SECONDS", help="With --execute: wait up to this long for them."),
    ] = 0.0,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Move a topic's replicas on one broker to another of its log dirs (AlterReplicaLogDirs, as
    kafka-reassign-partitions.sh with log dirs): print the plan, and with --execute start the moves.
    The partitions keep serving while their files are copied; `log-dirs describe` shows a move in
    progress as a future replica. --wait SECONDS waits for the moves to finish.

    Exit status 3 if the broker is not in the cluster, hosts none of the named partitions or the
    destination is not one of its log dirs (nothing moves); 1 if the broker refuses a move or the
    wait runs out."""
    from kctl.client.admin.log_dir_moves import (
        LogDirMoveError,
        plan_log_dir_moves,
        start_log_dir_moves,
        wait_for_log_dir_moves,
    )
    from kctl.commands.clients import admin_session

    with admin_session(*cluster) as admin:
        try:
            plan = plan_log_dir_moves(admin, broker, topic, to, partitions)
        except LogDirMoveError as error:
            raise KctlError(str(error), ExitCode.NOT_FOUND) from None
        if execute and plan.moving:
            start_log_dir_moves(admin, plan)
            wait_for_log_dir_moves(admin, plan, wait)
    rows = [
        {
            "broker": broker,
            "topic": tp.topic,
            "partition": tp.partition,
            "from": plan.current[tp],
            "to": to,
            "status": plan.status[tp],
        }
        for tp in plan.wanted
    ]
    render_rows(rows, MOVE_COLUMNS, fmt)
    if not execute and plan.moving:
        info("dry run: nothing moved; add --execute to start the moves")
    if plan.refused:
        raise KctlError(f"broker {broker} refused to move {', '.join(map(str, plan.refused))}")
    if execute and wait > 0 and plan.in_progress:
        raise KctlError(f"the moves did not finish within {wait:g} s (still in progress)")


# -- list ------------------------------------------------------------------------------------------
BROKER_COLUMNS = [
    Column("rack", formatter=lambda r: r or "-"),
    Column("broker_id", "ID"),
    Column("endpoint"),
    Column("controller", formatter=lambda c: "*" if c else ""),
    Column("leader_partitions", "LEADS"),
    Column("replica_partitions", "HOSTS"),
]


@app.command("list")
@cluster_options
def list_brokers(
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """List the live brokers of a running cluster: rack, id, endpoint (host:port), the controller
    (*), and how many partitions each leads and hosts (replicas, internal topics included), from
    Metadata. Grouped by rack, then host (the brokers of one `broker start --processes` together:
    their rack is their host name), then id.

    Talks to a running cluster (-b); --config/-X take client properties here."""
    from kctl.commands.clients import admin_session

    with admin_session(*cluster) as admin:
        description = admin.describe_cluster()
        topics = admin.list_topics(include_internal=True)
    leads: dict[int, int] = {}
    hosts: dict[int, int] = {}
    for topic in topics:
        for p in topic.partitions:
            if p.leader >= 0:
                leads[p.leader] = leads.get(p.leader, 0) + 1
            for replica in p.replicas:
                hosts[replica] = hosts.get(replica, 0) + 1
    rows = [
        {
            "broker_id": b.node_id,
            "endpoint": b.address,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "controller": b.node_id == description.controller_id,
            "leader_partitions": leads.get(b.node_id, 0),
            "replica_partitions": hosts.get(b.node_id, 0),
        }
        for b in sorted(description.brokers, key=lambda b: (b.rack or "", b.host, b.node_id))
    ]
    columns = BROKER_COLUMNS
    if fmt is not OutputFormat.TABLE:
        columns = [
            *BROKER_COLUMNS[1:3],
            Column("host"),
            Column("port"),
            BROKER_COLUMNS[0],
            *BROKER_COLUMNS[3:],
        ]
    render_rows(rows, columns, fmt)


BROKER_CONFIG_COLUMNS = [
    Column("broker_id", "BROKER"),
    Column("name"),
    Column("value"),
    Column("default"),
    Column("source"),
    Column("read_only", "READ-ONLY"),
]


# -- kctl broker config describe|alter: dynamic broker configs ------------------------------------
config_app = typer.Typer(
    help="Describe and alter broker configs, per broker or cluster-wide (kafka-configs.sh --entity-type "
    "brokers).",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")

BrokerIdOption = Annotated[
    int | None,
    typer.Option("--broker", metavar="ID", help="The broker (describe: default any broker)."),
]
DefaultOption = Annotated[
    bool,
    typer.Option("--default", help="The cluster-wide dynamic defaults (Kafka's default broker entity)."),
]
DYNAMIC_SOURCES = ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG")
PLAN_COLUMNS = [
    Column("entity", "BROKER"),
    Column("name"),
    Column("action"),
    Column("current"),
    Column("new"),
]


def _entity(broker_id: int | None, default: bool) -> int | None:
    if default and broker_id is not None:
        raise KctlError("give --broker ID or --default, not both", ExitCode.USAGE)
    return broker_id


@config_app.command("describe")
@cluster_options
def config_describe(
    broker_id: BrokerIdOption = None,
    default: DefaultOption = False,
    show_all: Annotated[
        bool,
        typer.Option("--all", help="Every config with its value and source (default: the dynamic ones)."),
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Show a broker's dynamic configs (set with `kctl broker config alter`), or with --all every config
    with its value, built-in default, source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and whether it is read-only; --default: the cluster-wide
    dynamic defaults. Sensitive values are not shown. Exit status 3 when the broker is unknown."""
    from kctl.commands.clients import admin_session

    wanted = _entity(broker_id, default)
    with admin_session(*cluster) as admin:
        if wanted is None and not default:
            wanted = admin.describe_cluster().brokers[0].node_id
        elif wanted is not None:
            known = [b.node_id for b in admin.describe_cluster().brokers]
            if wanted not in known:
                raise KctlError(f"no broker {wanted} in the cluster (brokers: {known})", ExitCode.NOT_FOUND)
        entries = admin.describe_broker_configs(wanted)
    if not show_all:
        entries = [e for e in entries if e.source.name in DYNAMIC_SOURCES]
    label = "<default>" if wanted is None else wanted
    rows = [{"broker_id": label, **entry.as_row()} for entry in entries]
    render_rows(rows, BROKER_CONFIG_COLUMNS, fmt, title=f"broker {label}")


@config_app.command("alter")
@cluster_options
def config_alter(
    broker_id: BrokerIdOption = None,
    default: DefaultOption = False,
    set_configs: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY=VALUE", help="Set a dynamic config (repeatable)."),
    ] = None,
    delete_configs: Annotated[
        list[str] | None,
        typer.Option("--delete", metavar="KEY", help="Remove a dynamic config (repeatable)."),
    ] = None,
    execute: Annotated[
        bool,
        typer.Option("--execute", help="Apply the changes (without it: validate them and show the plan)."),
    ] = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Set or remove dynamic broker configs of one broker (--broker ID) or cluster-wide (--default),
    as kafka-configs.sh --entity-type brokers --alter does. Without --execute the broker validates
    the change (nothing is stored) and the plan is printed; --execute stores it in the registry and
    the brokers apply it without a restart where Kafka does (log defaults, compression, the cleaner's
    backoff, unclean election, replication throttles, a TLS listener's key and trust material under
    `listener.name.NAME.ssl.*`; listeners at the next start). Read-only
    configs are refused. Exit status 1 when the broker refuses the change."""
    from kctl.commands.clients import admin_session
    from kctl.commands.options import parse_set_options

    wanted = _entity(broker_id, default)
    if wanted is None and not default:
        raise KctlError("give --broker ID or --default", ExitCode.USAGE)
    changes = parse_set_options(set_configs)
    deletes = list(dict.fromkeys(delete_configs or ()))
    if not changes and not deletes:
        raise KctlError("nothing to change: give --set or --delete", ExitCode.USAGE)
    label = "<default>" if wanted is None else str(wanted)
    with admin_session(*cluster) as admin:
        current = {e.name: e for e in admin.describe_broker_configs(wanted)}
        result = admin.alter_broker_configs(wanted, changes, deletes, validate_only=not execute)
    rows = [
        {
            "entity": label,
            "name": name,
            "action": "set",
            "current": current[name].value if name in current else None,
            "new": value,
        }
        for name, value in changes.items()
    ]
    rows += [
        {
            "entity": label,
            "name": name,
            "action": "delete",
            "current": current[name].value if name in current else None,
            "new": None,
        }
        for name in deletes
    ]
    if result.error_code:
        raise KctlError(f"broker {label}: {result.error}: {result.error_message}", ExitCode.FAILURE)
    render_rows(rows, PLAN_COLUMNS, fmt, title=f"broker {label} config changes")
    if execute:
        info(f"altered the configs of broker {label}")
    else:
        info("validated; nothing changed: add --execute to apply")

"""`kctl mirror`: copy one or more source clusters into a target cluster, continuously or once; plan
it (`--dry-run`); translate consumer group offsets onto the target (`--translate-group`). The work is
kctl.mirror."""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    ConfigFileOption,
    ConfigOverrideOption,
    ConfigSource,
    FormatOption,
    load_config,
)
from kctl.commands.output import Column, OutputFormat, info, render_rows, stderr_console, warn

if TYPE_CHECKING:
    from kctl.mirror import ClusterSpec, MirrorSpec, PartitionStatus

app = typer.Typer(  # one command: its help is the docstring of `mirror`
    invoke_without_command=True,
    subcommand_metavar="",
)

STATUS_COLUMNS = [
    Column("source"),
    Column("topic"),
    Column("partition"),
    Column("target_topic", "TARGET TOPIC"),
    Column("position"),
    Column("high_watermark", "END"),
    Column("lag"),
    Column("records"),
    Column("bytes"),
]
PLAN_COLUMNS = [
    Column("source"),
    Column("topic"),
    Column("target_topic", "TARGET TOPIC"),
    Column("partitions"),
    Column("action"),
    Column("configs"),
]
TRANSLATE_COLUMNS = [
    Column("group"),
    Column("topic"),
    Column("partition"),
    Column("source_offset", "SOURCE OFFSET"),
    Column("target_topic", "TARGET TOPIC"),
    Column("target_offset", "TARGET OFFSET"),
    Column("previous_target_offset", "TARGET BEFORE"),
    Column("outcome"),
]


def _cluster(value: str, config_file: Path | None, overrides: list[str] | None, what: str) -> ClusterSpec:
    """``NAME`` (clusters file), ``ALIAS=HOST:PORT[,...]`` or ``HOST:PORT[,...]`` as a ClusterSpec,
    with --config and -X on top of the named cluster's properties."""
    from kctl.client import ClientConfig, ConsumerConfig, ProducerConfig
    from kctl.mirror import ClusterSpec

    alias, sep, servers = value.partition("=")
    if not sep:
        alias, servers = "", value
    if sep and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", alias):
        raise KctlError(f"{what} {value!r}: the alias before '=' must be a plain name", ExitCode.USAGE)
    resolved = load_config(config_file, overrides, bootstrap_server=servers.strip())
    known = ClientConfig.known_keys() | ProducerConfig.known_keys() | ConsumerConfig.known_keys()
    properties: dict[str, str] = {}
    for entry in resolved.entries():
        if entry.key == "bootstrap.servers":
            continue
        if entry.key not in known and entry.source is ConfigSource.OVERRIDE:
            raise KctlError(f"unknown client property {entry.key!r} in -X", ExitCode.USAGE)
        properties[entry.key] = entry.value
    bootstrap = resolved.bootstrap_servers
    if not alias:
        named = bootstrap != servers.strip()
        alias = servers.strip() if named else re.sub(r"[^A-Za-z0-9_.-]+", "_", servers.strip()).strip("_")
    try:
        ClientConfig.from_properties({k: v for k, v in properties.items() if k in ClientConfig.known_keys()})
    except Exception as error:
        raise KctlError(f"{what} {value!r}: invalid client property {error}", ExitCode.USAGE) from None
    return ClusterSpec(alias, bootstrap, properties)


def _status_document(
    rows: list[PartitionStatus], previous: dict[tuple[str, str, int], tuple[int, int]], elapsed: float
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for r in rows:
        before = previous.get((r.source, r.topic, r.partition), (0, 0))
        parts.append(
            {
                "source": r.source,
                "topic": r.topic,
                "partition": r.partition,
                "target_topic": r.target_topic,
                "position": r.acked,
                "high_watermark": r.high_watermark,
                "lag": r.lag,
                "records": r.records,
                "records_per_sec": round((r.records - before[0]) / elapsed, 1) if elapsed > 0 else 0.0,
                "bytes_per_sec": round((r.bytes - before[1]) / elapsed, 1) if elapsed > 0 else 0.0,
            }
        )
        previous[(r.source, r.topic, r.partition)] = (r.records, r.bytes)
    return {
        "time_ms": int(time.time() * 1000),
        "records": sum(r.records for r in rows),
        "bytes": sum(r.bytes for r in rows),
        "lag": sum(r.lag for r in rows),
        "records_per_sec": round(sum(p["records_per_sec"] for p in parts), 1),
        "bytes_per_sec": round(sum(p["bytes_per_sec"] for p in parts), 1),
        "partitions": parts,
    }


class _StatusPrinter:
    """Per-partition lag and throughput: a live rich table on a terminal (table format), JSON status
    lines on stdout with --format json/jsonl, nothing periodic otherwise."""

    def __init__(self, fmt: OutputFormat) -> None:
        self.fmt = fmt
        self.previous: dict[tuple[str, str, int], tuple[int, int]] = {}
        self.last = time.monotonic()
        self.live: Any = None
        if fmt is OutputFormat.TABLE and stderr_console.is_terminal:
            from rich.live import Live

            self.live = Live(console=stderr_console, transient=True, auto_refresh=False)
            self.live.start()

    def __call__(self, rows: list[PartitionStatus]) -> None:
        now = time.monotonic()
        document = _status_document(rows, self.previous, now - self.last)
        self.last = now
        if self.fmt in (OutputFormat.JSON, OutputFormat.JSONL):
            sys.stdout.write(json.dumps(document, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        elif self.live is not None:
            from rich.table import Table

            table = Table(title=f"mirror: {document['records_per_sec']:.0f} records/s, lag {document['lag']}")
            for name in ("source", "topic", "partition", "target", "position", "lag", "records/s", "MB/s"):
                table.add_column(
                    name, justify="right" if name not in ("source", "topic", "target") else "left"
                )
            for p in document["partitions"]:
                table.add_row(
                    p["source"],
                    p["topic"],
                    str(p["partition"]),
                    p["target_topic"],
                    str(p["position"]),
                    str(p["lag"]),
                    f"{p['records_per_sec']:.0f}",
                    f"{p['bytes_per_sec'] / 1e6:.2f}",
                )
            self.live.update(table, refresh=True)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()


@app.callback()
def mirror(
    sources: Annotated[
        list[str],
        typer.Option(
            "--from",
            metavar="CLUSTER",
            help="A source cluster: a name from the clusters file, HOST:PORT[,...] or ALIAS=HOST:PORT[,...] "
            "(repeatable: several sources into one target).",
        ),
    ],
    target: Annotated[
        str,
        typer.Option("--to", metavar="CLUSTER", help="The target cluster (same forms as --from)."),
    ],
    include: Annotated[
        str,
        typer.Option("--include", metavar="REGEX", help="Mirror the topics whose whole name matches REGEX."),
    ] = ".*",
    exclude: Annotated[
        str | None,
        typer.Option(
            "--exclude", metavar="REGEX", help="Do not mirror the topics whose whole name matches REGEX."
        ),
    ] = None,
    include_internal: Annotated[
        bool,
        typer.Option("--include-internal", help="Also mirror internal topics (__…, ….internal)."),
    ] = False,
    rename: Annotated[
        str,
        typer.Option(
            "--rename",
            metavar="TEMPLATE",
            help="Target topic names from {cluster} (the source's name) and {topic}, "
            "e.g. '{cluster}.{topic}'; with {cluster}, topics that came from the target are never "
            "mirrored back.",
        ),
    ] = "{topic}",
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            metavar="GROUP",
            help="The group on each source holding the mirror's positions (default `kctl-mirror-TARGET`).",
        ),
    ] = None,
    start: Annotated[
        str,
        typer.Option(
            "--start",
            metavar="beginning|end",
            help="Where partitions without a committed position start.",
        ),
    ] = "beginning",
    once: Annotated[
        bool,
        typer.Option("--once", help="Copy up to the end offsets seen at the start, then exit 0."),
    ] = False,
    exactly_once: Annotated[
        bool,
        typer.Option(
            "--exactly-once",
            help=(
                "Copy in transactions, each with the source positions it advances, stored in the "
                "target (topic kctl-mirror-positions.internal): after any crash, every source record "
                "is in the target exactly once for read_committed consumers."
            ),
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Show what would be mirrored where (topics, partitions, configs); change nothing.",
        ),
    ] = False,
    sync_group_offsets: Annotated[
        bool,
        typer.Option(
            "--sync-group-offsets",
            help="While running, translate the sources' consumer group offsets onto the target.",
        ),
    ] = False,
    groups_pattern: Annotated[
        str,
        typer.Option("--groups", metavar="REGEX", help="The groups --sync-group-offsets translates."),
    ] = ".*",
    translate_group: Annotated[
        list[str] | None,
        typer.Option(
            "--translate-group",
            metavar="GROUP",
            help="One shot: show (with --execute, commit) GROUP's source offsets translated to the "
            "target; no mirroring.",
        ),
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="With --translate-group: commit the translation.")
    ] = False,
    replication_factor: Annotated[
        int,
        typer.Option(
            "--replication-factor",
            "-r",
            metavar="N",
            help="Of created target topics (default: the target's).",
        ),
    ] = -1,
    refresh_interval: Annotated[
        float,
        typer.Option(
            "--refresh-interval",
            metavar="SECONDS",
            min=0.1,
            help="How often new topics and partitions are looked for.",
        ),
    ] = 5.0,
    commit_interval: Annotated[
        float,
        typer.Option(
            "--commit-interval", metavar="SECONDS", min=0.05, help="How often positions are committed."
        ),
    ] = 1.0,
    status_interval: Annotated[
        float,
        typer.Option("--status-interval", metavar="SECONDS", min=0.1, help="How often status is shown."),
    ] = 5.0,
    clusters_file: Annotated[
        Path | None,
        typer.Option(
            "--clusters", metavar="FILE", dir_okay=False, help="The clusters file naming the clusters."
        ),
    ] = None,
    fmt: FormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
) -> None:
    """Mirror topics of one or more source clusters into a target cluster, as one process.

    Records keep key, value, headers, timestamp, partition and order; batches travel without being
    decoded where partitions map one to one. Target topics are created (source partition count and
    configs) and grown as needed, new source topics are picked up while running. Delivery is
    at-least-once: positions are committed to the group `kctl-mirror-TARGET` on each source only
    after the target acknowledged (acks=all, idempotent), so a restart or `kill -9` loses nothing.
    Offset syncs go to the target's `__kctl_mirror_offset_syncs` topic, for `--sync-group-offsets`
    and `--translate-group`.

    With --exactly-once each source is copied in transactions (a read_committed consumer on the
    source, a transactional producer on the target): each transaction also writes the source
    positions it advances to the target's compacted `kctl-mirror-positions.internal`, and a start
    reads them back from there, so a mirror killed at any moment (kill -9) and restarted leaves
    every source record in the target exactly once for read_committed consumers.

    Status (per-partition position, lag, records/s, bytes/s) is a live table on a terminal, or one
    JSON object per `--status-interval` on stdout with `-f json`/`jsonl`; the final per-partition
    rows are printed at the end. SIGTERM or Ctrl-C stops cleanly (exit 0).

    Exit status 0 when stopped or (with --once) caught up, 1 when mirroring failed (the message
    names the cluster and topic), 2 on a usage error, 3 when a cluster cannot be reached or a named
    cluster is unknown."""
    from kctl.mirror import MirrorSpec, TopicPolicy

    if clusters_file is not None:
        import os

        from kctl.client.clusters_file import CLUSTERS_ENV

        os.environ[CLUSTERS_ENV] = str(clusters_file)
    if start not in ("beginning", "end"):
        raise KctlError(f"--start must be beginning or end, not {start!r}", ExitCode.USAGE)
    if execute and not translate_group:
        raise KctlError("--execute goes with --translate-group", ExitCode.USAGE)
    source_specs = [_cluster(s, config_file, overrides, "--from") for s in sources]
    target_spec = _cluster(target, config_file, overrides, "--to")
    aliases = [s.alias for s in source_specs]
    if len(set(aliases)) != len(aliases):
        raise KctlError(
            f"two sources have the same name: {aliases}; name them ALIAS=HOST:PORT", ExitCode.USAGE
        )
    if target_spec.alias in aliases or target_spec.bootstrap_servers in {
        s.bootstrap_servers for s in source_specs
    }:
        raise KctlError("the target is also a source", ExitCode.USAGE)
    try:
        policy = TopicPolicy(include, exclude, rename, include_internal)
    except (re.error, ValueError, KeyError, IndexError) as error:
        raise KctlError(f"invalid topic selection: {error}", ExitCode.USAGE) from None
    spec = MirrorSpec(
        source_specs,
        target_spec,
        policy,
        group=group,
        once=once,
        start=start,
        replication_factor=replication_factor,
        refresh_interval=refresh_interval,
        commit_interval=commit_interval,
        sync_group_offsets=sync_group_offsets,
        groups_pattern=groups_pattern,
        exactly_once=exactly_once,
    )
    if translate_group:
        _translate(spec, translate_group, execute, fmt)
        return
    _run(spec, dry_run, fmt, status_interval)


def _unreachable(error: BaseException) -> bool:
    text = str(error)
    return any(
        word in text
        for word in ("cannot connect", "Connection refused", "unreachable", "no broker", "timed out")
    )


def _run(spec: MirrorSpec, dry_run: bool, fmt: OutputFormat, status_interval: float) -> None:
    from kctl.client import KafkaError
    from kctl.mirror import Mirror, MirrorError

    runner = Mirror(spec)
    printer: _StatusPrinter | None = None
    try:
        try:
            runner.prepare(apply=not dry_run)
        except (MirrorError, KafkaError) as error:
            code = ExitCode.NOT_FOUND if _unreachable(error) else ExitCode.FAILURE
            raise KctlError(str(error), code) from None
        if dry_run:
            rows = []
            for run in runner.runs:
                for action in sorted(run.actions.values(), key=lambda a: a.source_topic):
                    rows.append(
                        {
                            "source": run.spec.alias,
                            "topic": action.source_topic,
                            "target_topic": action.target_topic,
                            "partitions": action.source_partitions,
                            "action": action.action,
                            "configs": dict(action.configs)
                            if fmt is not OutputFormat.TABLE
                            else ",".join(f"{k}={v}" for k, v in sorted(action.configs.items())),
                        }
                    )
                for topic, reason in sorted(run.skipped.items()):
                    if reason != "internal":
                        info(f"{run.spec.alias}: not mirroring {topic}: {reason}")
            render_rows(rows, PLAN_COLUMNS, fmt)
            return
        stop_signals = (signal.SIGTERM, signal.SIGINT)
        previous = {s: signal.signal(s, lambda *_: runner.stop()) for s in stop_signals}
        started = time.monotonic()
        printer = _StatusPrinter(fmt)
        try:
            runner.run(on_status=printer, status_interval=status_interval)
        except MirrorError as error:
            raise KctlError(str(error), ExitCode.FAILURE) from None
        except KafkaError as error:
            code = ExitCode.NOT_FOUND if _unreachable(error) else ExitCode.FAILURE
            raise KctlError(str(error), code) from None
        finally:
            printer.stop()
            for s, handler in previous.items():
                signal.signal(s, handler)
        statuses = runner.statuses()
        elapsed = max(time.monotonic() - started, 1e-6)
        records = sum(s.records for s in statuses)
        size = sum(s.bytes for s in statuses)
        render_rows([vars(s) | {"position": s.acked} for s in statuses], STATUS_COLUMNS, fmt)
        info(
            f"mirrored {records} records ({size / 1e6:.2f} MB) in {elapsed:.2f}s: "
            f"{records / elapsed:.0f} records/s, {size / elapsed / 1e6:.2f} MB/s"
        )
    finally:
        runner.close()


def _translate(spec: MirrorSpec, groups: list[str], execute: bool, fmt: OutputFormat) -> None:
    from kctl.client import AdminClient, GroupAdmin, KafkaError
    from kctl.mirror import read_offset_syncs, translate_groups

    target_admin = AdminClient(spec.target.bootstrap_servers, spec.target.client_config())
    rows: list[dict[str, Any]] = []
    try:
        store = read_offset_syncs(spec.target.bootstrap_servers, spec.target.properties)
        if not len(store):
            warn(f"no offset syncs on {spec.target.alias}: has the mirror run?")
        for source in spec.sources:
            source_admin = AdminClient(source.bootstrap_servers, source.client_config())
            try:
                source_groups = GroupAdmin(source_admin)
                mirrored = {
                    tp: value.offset
                    for tp, value in source_groups.committed_offsets(spec.group_id).items()
                    if value is not None
                }
                for row in translate_groups(
                    source_groups,
                    GroupAdmin(target_admin),
                    store,
                    source.alias,
                    mirrored,
                    groups=groups,
                    execute=execute,
                ):
                    rows.append(vars(row))
            finally:
                source_admin.close()
    except KafkaError as error:
        code = ExitCode.NOT_FOUND if _unreachable(error) else ExitCode.FAILURE
        raise KctlError(str(error), code) from None
    finally:
        target_admin.close()
    render_rows(rows, TRANSLATE_COLUMNS, fmt)
    if not execute and any(r["outcome"] == "planned" for r in rows):
        info("this is the plan: --execute commits it on the target")
    failed = [r for r in rows if r["outcome"] not in ("planned", "committed", "up to date", "target ahead")]
    if execute and failed:
        raise typer.Exit(ExitCode.FAILURE)


__all__ = ["app", "mirror"]

"""`kctl log`: offline tools for partition directories and segment files (no broker needed).

``dump`` lists batches (and with ``--deep`` their records) and index entries; ``verify`` checks
CRCs, offsets, indexes and trailing bytes; ``recover`` cuts a damaged tail and rebuilds indexes;
``purge`` deletes whole segments by the broker's retention rules."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    BytesOption,
    ConfigFileOption,
    ConfigOverrideOption,
    FormatOption,
    load_config,
)
from kctl.commands.output import Column, OutputFormat, info, progress, render_documents, render_rows, warn

if TYPE_CHECKING:
    from kctl.log.config import LogConfig

# kctl.log and kctl.records are imported in the functions that use them, so that `kctl log --help`
# starts without them (tests/cli/test_cli_startup.py).


def readable_timestamp(ms: int) -> str:
    """Epoch milliseconds as RFC 3339 UTC in tables (kctl.console.formats, imported when used)."""
    from kctl.console.formats import readable_timestamp as iso

    return iso(ms)

app = typer.Typer(
    help="Inspect, verify and repair partition directories and segment files offline.",
    no_args_is_help=True,
)

PathArgument = Annotated[
    Path,
    typer.Argument(
        metavar="PATH",
        help="A partition directory (e.g. /data/my_topic_0) or one segment file (.log, .index, .timeindex).",
    ),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", "-n", help="Show what would be done; change nothing.")
]


def _log_config(config_file: Path | None, overrides: list[str] | None) -> LogConfig:
    """Topic-level settings (Kafka names, e.g. -X index.interval.bytes=4096) for the tools."""
    from kctl.log.config import TOPIC_CONFIGS, InvalidConfigError, LogConfig

    resolved = load_config(config_file, overrides, allowed_keys=TOPIC_CONFIGS.keys())
    try:
        return LogConfig().with_overrides(dict(resolved))
    except InvalidConfigError as error:
        raise KctlError(str(error), ExitCode.USAGE) from None


def _segments(path: Path, *, warn_empty: bool = True) -> list[tuple[int, Path]]:
    from kctl.log.inspect import NotASegmentError, segment_logs

    try:
        segments = segment_logs(path)
    except FileNotFoundError:
        raise KctlError(f"no such file or directory: {path}", ExitCode.NOT_FOUND) from None
    except NotASegmentError as error:
        raise KctlError(str(error), ExitCode.USAGE) from None
    if warn_empty and not segments and path.is_dir():
        warn(f"{path} holds no segment files")
    return segments


# -- dump ------------------------------------------------------------------------------------------
BATCH_COLUMNS = [
    Column("file"),
    Column("position"),
    Column("base_offset", "BASE"),
    Column("last_offset", "LAST"),
    Column("count"),
    Column("size", size=True),
    Column("compression", "CODEC"),
    Column("first_timestamp", "FIRST-TS", formatter=readable_timestamp),
    Column("max_timestamp", "MAX-TS", formatter=readable_timestamp),
    Column("crc"),
    Column("valid"),
]
RECORD_COLUMNS = [
    Column("offset"),
    Column("timestamp", formatter=readable_timestamp),
    Column("key"),
    Column("value"),
    Column("headers"),
]


def _decode_offsets_record(record: dict[str, Any]) -> dict[str, Any]:
    """A __consumer_offsets record with its key and value decoded; an undecodable one keeps its
    bytes and says why."""
    from kctl.broker.group.records import CorruptOffsetsRecordError, decode_record

    key = record.get("key")
    if not isinstance(key, bytes):
        return record
    try:
        decoded_key, decoded_value = decode_record(key, record.get("value"))
    except CorruptOffsetsRecordError as error:
        return {**record, "error": f"not a __consumer_offsets record: {error}"}
    return {**record, "key": decoded_key, "value": decoded_value}


def _batch_documents(
    log_path: Path, deep: bool, problems: list[str], offsets_decoder: bool = False
) -> Iterator[dict[str, Any]]:
    from kctl.log.inspect import Unreadable, decode_records, read_batches
    from kctl.records.header import InvalidRecordBatch

    for item in read_batches(log_path):
        if isinstance(item, Unreadable):
            problems.append(f"{item.file} position {item.position}: {item.reason}")
            yield {
                "type": "unreadable",
                "file": item.file,
                "position": item.position,
                "size": item.size,
                "reason": item.reason,
            }
            return
        batch, data = item
        document: dict[str, Any] = {"type": "batch", **batch.as_row()}
        if not batch.valid:
            problems.append(f"{batch.file} position {batch.position}: {batch.error}")
        if deep:
            try:
                document["records"] = decode_records(data)
                if offsets_decoder:
                    document["records"] = [_decode_offsets_record(r) for r in document["records"]]
            except InvalidRecordBatch as error:
                document["records"] = None
                document["error"] = f"records cannot be decoded: {error}"
                problems.append(f"{batch.file} position {batch.position}: records cannot be decoded: {error}")
        yield document


def _index_documents(base_offset: int, log_path: Path) -> Iterator[dict[str, Any]]:
    from kctl.log.inspect import read_offset_index, read_time_index
    from kctl.log.naming import index_file, time_index_file

    offset_path = index_file(log_path.parent, base_offset)
    if offset_path.exists():
        entries, leftover = read_offset_index(offset_path, base_offset)
        for slot, (offset, position) in enumerate(entries):
            yield {
                "type": "index",
                "file": offset_path.name,
                "entry": slot,
                "offset": offset,
                "position": position,
            }
        if leftover:
            warn(f"{offset_path.name}: {leftover} trailing bytes do not form an entry")
    time_path = time_index_file(log_path.parent, base_offset)
    if time_path.exists():
        entries, leftover = read_time_index(time_path, base_offset)
        for slot, (timestamp, offset) in enumerate(entries):
            yield {
                "type": "timeindex",
                "file": time_path.name,
                "entry": slot,
                "timestamp": timestamp,
                "offset": offset,
            }
        if leftover:
            warn(f"{time_path.name}: {leftover} trailing bytes do not form an entry")


@app.command("dump")
def dump(
    path: PathArgument,
    deep: Annotated[
        bool,
        typer.Option("--deep", help="Also decode every record (offset, timestamp, key, value, headers)."),
    ] = False,
    indexes: Annotated[
        bool, typer.Option("--indexes/--no-indexes", help="Also list the .index and .timeindex entries.")
    ] = False,
    offsets_decoder: Annotated[
        bool,
        typer.Option(
            "--offsets-decoder",
            help="Decode __consumer_offsets records (offset commits and group metadata); implies --deep.",
        ),
    ] = False,
    exact_sizes: BytesOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
) -> None:
    """List the batches of a partition directory or segment, with their offsets, sizes, codecs and CRCs.

    Naming a .index or .timeindex file lists that index; naming a .snapshot file lists the
    idempotent producers it remembers (one row per remembered batch). In json/jsonl every object has
    a "type": batch, index, timeindex, unreadable or snapshot; keys and values that are not UTF-8 appear as
    {"base64": "..."}. Tables show times in RFC 3339 UTC and sizes human-readable (--bytes: exact);
    JSON has epoch milliseconds and bytes. Exit status 0, also when invalid batches are listed (see
    `kctl log verify`)."""
    from kctl.log.inspect import checkpoint_rows, is_checkpoint_file
    from kctl.log.naming import INDEX_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX

    _log_config(config_file, overrides)
    if path.is_file() and path.name.endswith(SNAPSHOT_SUFFIX):
        rows = _snapshot_documents(path)
        if fmt is OutputFormat.TABLE:
            render_rows(rows, SNAPSHOT_COLUMNS, fmt, title="producer snapshot")
        else:
            render_documents(rows, fmt)
        return
    if is_checkpoint_file(path):
        try:
            rows = checkpoint_rows(path)
        except ValueError as error:  # a corrupt checkpoint
            raise KctlError(f"{path}: {error}") from None
        if fmt is OutputFormat.TABLE:
            render_rows(rows, CHECKPOINT_COLUMNS[rows[0]["type"]] if rows else ["file"], fmt, title=path.name)
        else:
            render_documents(rows, fmt)
        return
    segments = _segments(path)
    only_index = path.is_file() and path.name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX))
    problems: list[str] = []

    def documents() -> Iterator[dict[str, Any]]:
        for base_offset, log_path in segments:
            if only_index:
                for document in _index_documents(base_offset, log_path):
                    if path.name.endswith(INDEX_SUFFIX) == (document["type"] == "index"):
                        yield document
                continue
            if not log_path.exists():
                raise KctlError(f"segment file not found: {log_path}", ExitCode.NOT_FOUND)
            yield from _batch_documents(log_path, deep or offsets_decoder, problems, offsets_decoder)
            if indexes:
                yield from _index_documents(base_offset, log_path)

    if fmt is OutputFormat.TABLE:
        _dump_tables(documents(), deep or offsets_decoder, exact_sizes)
    else:
        render_documents(documents(), fmt)
    for problem in problems:
        warn(problem)


CHECKPOINT_COLUMNS = {
    "leader_epoch": [Column("epoch"), Column("start_offset", "START-OFFSET")],
    "checkpoint": [Column("topic"), Column("partition"), Column("offset")],
}
SNAPSHOT_COLUMNS = [
    Column("producer_id", "PRODUCER-ID"),
    Column("producer_epoch", "EPOCH"),
    Column("first_sequence", "FIRST-SEQ"),
    Column("last_sequence", "LAST-SEQ"),
    Column("first_offset", "FIRST-OFFSET"),
    Column("last_offset", "LAST-OFFSET"),
    Column("max_timestamp", "MAX-TS", formatter=readable_timestamp),
]


def _snapshot_documents(path: Path) -> list[dict[str, Any]]:
    """One row per remembered batch of each producer in a producer snapshot (a producer with none
    gets one row without batch fields). Exit 1 if the snapshot cannot be trusted."""
    from kctl.log.producer_state import CorruptSnapshotError, read_snapshot

    try:
        producers = read_snapshot(path)
    except CorruptSnapshotError as error:
        raise KctlError(f"{path}: producer snapshot cannot be trusted: {error}") from None
    except OSError as error:
        raise KctlError(f"{path}: {error.strerror or error}", ExitCode.NOT_FOUND) from None
    rows: list[dict[str, Any]] = []
    for producer_id, entry in sorted(producers.items()):
        base = {
            "type": "snapshot",
            "file": path.name,
            "producer_id": producer_id,
            "producer_epoch": entry.epoch,
        }
        if not entry.batches:
            rows.append(base)
        for batch in entry.batches:
            rows.append(
                {
                    **base,
                    "first_sequence": batch.first_sequence,
                    "last_sequence": batch.last_sequence,
                    "first_offset": batch.first_offset,
                    "last_offset": batch.last_offset,
                    "max_timestamp": batch.max_timestamp,
                }
            )
    return rows


def _dump_tables(documents: Iterator[Mapping[str, Any]], deep: bool, exact_sizes: bool = False) -> None:
    by_type: dict[str, list[Mapping[str, Any]]] = {}
    records: list[dict[str, Any]] = []
    for document in documents:
        by_type.setdefault(document["type"], []).append(document)
        if deep and document["type"] == "batch":
            for record in document.get("records") or []:
                records.append({"file": document["file"], "batch": document["base_offset"], **record})
    if "batch" in by_type:
        render_rows(
            by_type["batch"], BATCH_COLUMNS, OutputFormat.TABLE, title="batches", exact_sizes=exact_sizes
        )
    if deep and records:
        columns = [Column("file"), Column("batch"), *RECORD_COLUMNS]
        render_rows(records, columns, OutputFormat.TABLE, title="records")
    for kind, table, title in SECONDARY_TABLES:
        if kind in by_type:
            render_rows(by_type[kind], table, OutputFormat.TABLE, title=title, exact_sizes=exact_sizes)


SECONDARY_TABLES: list[tuple[str, list[Column | str], str]] = [
    (
        "unreadable",
        [Column("file"), Column("position"), Column("size", size=True), Column("reason")],
        "unreadable bytes",
    ),
    ("index", ["file", "entry", "offset", "position"], "offset index"),
    (
        "timeindex",
        ["file", "entry", Column("timestamp", formatter=readable_timestamp), "offset"],
        "time index",
    ),
]


# -- verify ----------------------------------------------------------------------------------------
FINDING_COLUMNS = ["path", "file", "position", "offset", "problem"]


@app.command("verify")
def verify_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH...", help="Partition directories or segment files to check."),
    ],
    fmt: FormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
) -> None:
    """Check CRCs, offset order, index and time-index consistency and trailing bytes.

    A PATH may also be a whole log directory (`kctl log verify /data`): every partition directory
    in it and its offset checkpoints are checked. Prints one row per finding (file, byte position,
    offset, problem) and a summary on stderr. Exit status 0 when everything is clean, 1 when
    anything is wrong, 3 when a PATH is missing or holds nothing to check."""
    from kctl.log.inspect import is_checkpoint_file
    from kctl.log.verify import verify

    _log_config(config_file, overrides)
    findings: list[dict[str, Any]] = []
    totals = {"segments": 0, "batches": 0, "records": 0, "bytes": 0}
    notes: list[str] = []
    for path in paths:
        if not is_checkpoint_file(path):
            _segments(path, warn_empty=False)  # raises NOT_FOUND / USAGE early, before any output
    paths = _verify_targets(paths)
    with progress() as bar:
        task = bar.add_task("verifying", total=len(paths))
        for path in paths:
            report = verify(path)
            for key in totals:
                totals[key] += getattr(report, key)
            findings += [{"path": str(path), **finding.as_row()} for finding in report.findings]
            notes += report.notes
            bar.advance(task)
    if findings or fmt is not OutputFormat.TABLE:
        render_rows(findings, FINDING_COLUMNS, fmt, title="findings")
    for note in notes:
        info(f"note: {note}")
    summary = (
        f"checked {totals['segments']} segment(s), {totals['batches']} batch(es), "
        f"{totals['records']} record(s), {totals['bytes']} bytes: "
    )
    if findings:
        info(summary + f"{len(findings)} problem(s) found")
        raise typer.Exit(ExitCode.FAILURE)
    info(summary + "clean")


def _verify_targets(paths: list[Path]) -> list[Path]:
    """Each PATH, or a log directory's partitions; a directory with nothing to check is an error
    (never a silent "clean")."""
    from kctl.log.verify import verify_targets

    targets: list[Path] = []
    for path in paths:
        found = verify_targets(path)
        if not found:
            raise KctlError(
                f"nothing to verify in {path}: no segment files, partition directories or checkpoints",
                ExitCode.NOT_FOUND,
            )
        targets += found
    return targets


# -- recover ---------------------------------------------------------------------------------------
RECOVER_COLUMNS = [
    Column("file"),
    Column("action"),
    Column("size", size=True),
    Column("kept_bytes", "KEPT", size=True),
    Column("cut_bytes", "CUT", size=True),
    Column("batches_kept", "BATCHES"),
    Column("last_offset_kept", "LAST-OFFSET"),
    Column("reason"),
    Column("side_file", "SAVED-TO"),
]


@app.command("recover")
def recover_command(
    path: PathArgument,
    dry_run: DryRunOption = False,
    exact_sizes: BytesOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
) -> None:
    """Truncate at the first invalid batch, save the cut bytes next to the segment, rebuild the indexes.

    The broker's own recovery rules apply: a batch is valid when its header parses, its length fits
    the file, its CRC-32C matches and its offsets rise; segments after a damaged one are cut whole.
    Cut bytes go to `SEGMENT.log.cut`. Refuses to run while a broker holds the log directory.
    Exit status 0 on success; with --dry-run, 1 when something would be cut; 3 when PATH holds no
    segment file (not a partition directory: nothing is created there)."""
    from kctl.log.inspect import holds_legacy_messages
    from kctl.log.tools import DirectoryInUseError, NoSegmentsError, recover

    config = _log_config(config_file, overrides)
    for _, log_path in _segments(path, warn_empty=False):
        if holds_legacy_messages(log_path):
            raise KctlError(
                f"{log_path} holds magic 0/1 messages (written by a broker before Kafka 0.11): recovery "
                "would cut them as invalid; `kctl log dump` and `kctl log verify` read them",
                ExitCode.USAGE,
            )
    try:
        report = recover(path, dry_run=dry_run, config=config)
    except DirectoryInUseError as error:
        raise KctlError(str(error)) from None
    except NoSegmentsError as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    rows = [
        {
            "file": step.path.name,
            "action": step.action,
            "size": step.size,
            "kept_bytes": step.valid_bytes,
            "cut_bytes": step.cut_bytes,
            "batches_kept": step.scan.batches if step.scan and step.action != "delete" else 0,
            "last_offset_kept": step.scan.last_offset if step.scan and step.action != "delete" else None,
            "reason": step.reason,
            "side_file": report.side_files.get(step.path.name),
        }
        for step in report.steps
    ]
    rows += [
        {
            "file": name,
            "action": "set-aside",
            "size": size,
            "kept_bytes": 0,
            "cut_bytes": size,
            "batches_kept": 0,
            "last_offset_kept": None,
            "reason": f"not a complete compaction output: {reason}",
            "side_file": kept_as,
        }
        for name, size, reason, kept_as in report.set_aside
    ]
    title = "recovery plan" if dry_run else "recovery"
    render_rows(rows, RECOVER_COLUMNS, fmt, title=title, exact_sizes=exact_sizes)
    verb = "would cut" if dry_run else "cut"
    kept_segments = sum(1 for step in report.steps if step.action != "delete")
    info(
        f"kept {report.kept_bytes} bytes in {kept_segments} segment(s), "
        f"{verb} {report.cut_bytes} bytes" + ("" if dry_run else "; indexes rebuilt")
    )
    if dry_run and report.damaged:
        raise typer.Exit(ExitCode.FAILURE)


# -- purge -----------------------------------------------------------------------------------------
PURGE_COLUMNS = [
    Column("base_offset", "BASE"),
    Column("last_offset", "LAST"),
    Column("size", size=True),
    Column("reason"),
    Column("detail"),
]


@app.command("purge")
def purge_command(
    path: Annotated[
        Path, typer.Argument(metavar="PATH", help="A partition directory, e.g. /data/my_topic_0.")
    ],
    retention_ms: Annotated[
        int | None,
        typer.Option("--retention-ms", min=0, help="Delete segments whose newest record is older than N ms."),
    ] = None,
    retention_bytes: Annotated[
        int | None,
        typer.Option(
            "--retention-bytes", min=0, help="Delete the oldest segments until at most N bytes remain."
        ),
    ] = None,
    before_offset: Annotated[
        int | None,
        typer.Option("--before-offset", min=0, help="Delete segments whose offsets all lie below N."),
    ] = None,
    dry_run: DryRunOption = False,
    exact_sizes: BytesOption = False,
    fmt: FormatOption = DEFAULT_FORMAT,
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
) -> None:
    """Delete whole segments, oldest first, by the rules of the broker's retention.

    Give at least one rule; -X retention.ms=N and -X retention.bytes=N work too. Only whole segments
    are deleted; the active (last) segment goes only when it is entirely expired. Refuses to run
    while a broker holds the log directory. --before-offset past the log end offset is refused
    (exit 2, nothing deleted); the log end offset itself deletes every record. Exit status 0 (also
    when nothing was deleted); 3 when PATH holds no segment file (not a partition directory)."""
    from kctl.log.config import TOPIC_CONFIGS
    from kctl.log.tools import DirectoryInUseError, NoSegmentsError, PurgeTargetError, purge

    resolved = load_config(config_file, overrides, allowed_keys=TOPIC_CONFIGS.keys())
    if retention_ms is None and "retention.ms" in resolved:
        retention_ms = int(resolved["retention.ms"])
    if retention_bytes is None and "retention.bytes" in resolved:
        retention_bytes = int(resolved["retention.bytes"])
    if retention_ms is None and retention_bytes is None and before_offset is None:
        raise KctlError(
            "give at least one of --retention-ms, --retention-bytes, --before-offset", ExitCode.USAGE
        )
    if not path.exists():
        raise KctlError(f"no such directory: {path}", ExitCode.NOT_FOUND)
    if not path.is_dir():
        raise KctlError(f"{path} is not a partition directory", ExitCode.USAGE)
    try:
        report = purge(
            path,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            before_offset=before_offset,
            dry_run=dry_run,
        )
    except DirectoryInUseError as error:
        raise KctlError(str(error)) from None
    except NoSegmentsError as error:
        raise KctlError(str(error), ExitCode.NOT_FOUND) from None
    except PurgeTargetError as error:
        raise KctlError(
            f"--before-offset {error.offset} is past the log end offset of {path} "
            f"({error.log_end_offset}): nothing deleted",
            ExitCode.USAGE,
        ) from None
    rows: list[dict[str, Any]] = [
        {
            "base_offset": d.base_offset,
            "last_offset": d.next_offset - 1,
            "size": d.size,
            "reason": d.reason,
            "detail": d.detail,
        }
        for d in report.deleted
    ]
    title = "segments to delete" if dry_run else "deleted segments"
    render_rows(rows, PURGE_COLUMNS, fmt, title=title, exact_sizes=exact_sizes)
    verb = "would delete" if dry_run else "deleted"
    info(
        f"{verb} {len(rows)} segment(s), {sum(r['size'] for r in rows)} bytes; "
        f"log start offset {report.log_start_offset}, log end offset {report.log_end_offset}"
    )

"""`kctl spark load`: load topics into Parquet with Spark, exactly once across runs (the library is
`kctl.spark.load`; the data source `kctl.spark.source`).

Without `--execute` the command prints the plan (the offset range of each partition the next run
would load) and starts no Spark. With `--execute` it runs the load on `--master` (`local[*]` by
default), shows the tasks' progress on a terminal, and prints the per-partition ranges and records
on stdout (a table, or with `--format json|jsonl` one summary object) and the totals on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kctl.commands.clients import client_errors
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    DEFAULT_FORMAT,
    ClusterOptions,
    FormatOption,
    cluster_options,
    known_properties,
    load_config,
    parse_override,
)
from kctl.commands.output import OutputFormat, info, progress, render_object, render_rows

if TYPE_CHECKING:
    from kctl.spark.load import LoadPlan, LoadSummary
    from kctl.spark.options import OffsetBound

FILE_FORMATS = ("parquet",)
"""The output file formats, as `kctl.spark.load.FILE_FORMATS` has them: repeated here for the help, so
that `kctl spark --help` starts without pyspark's side of kctl (tests/cli/test_cli_startup.py checks)."""

app = typer.Typer(
    help="Spark jobs over kctl topics (needs the spark extra: pip install 'kctl[spark]').",
    no_args_is_help=True,
)

COLUMNS = ["topic", "partition", "from_offset", "until_offset", "records"]


def _until(text: str | None) -> OffsetBound | None:
    from kctl.spark.options import OffsetBound, SourceOptionError, parse_partition_map

    if text is None or text.strip().lower() == "latest":
        return None
    try:
        return OffsetBound("offsets", offsets=parse_partition_map("--until", text))
    except SourceOptionError as error:
        raise KctlError(str(error), ExitCode.USAGE) from None


def _spark_conf(entries: list[str] | None) -> dict[str, str]:
    conf = {}
    for text in entries or ():
        try:
            key, value = parse_override(text)
        except ValueError as error:
            raise KctlError(f"--conf: {error}", ExitCode.USAGE) from None
        conf[key] = value
    return conf


def _plan_rows(plan: LoadPlan) -> list[dict[str, Any]]:
    return [
        {
            "topic": p.topic,
            "partition": p.partition,
            "from_offset": p.from_offset,
            "until_offset": p.until_offset,
            "records": p.until_offset - p.from_offset,
        }
        for p in plan.partitions
    ]


def _job_failure(error: BaseException) -> str:
    """Why a Spark job failed, in one line: the Python worker's exception (the last line of its
    traceback) when a task raised one, else the first line of the error."""
    lines = [line.rstrip() for line in str(error).strip().splitlines()]
    if "Traceback (most recent call last):" in lines:
        traceback = lines[lines.index("Traceback (most recent call last):") + 1 :]
        raised = [line for line in traceback if line and not line[0].isspace()]
        if raised:
            return raised[0]
    return lines[0] if lines and lines[0] else type(error).__name__


def _report(summary: LoadSummary, fmt: OutputFormat) -> None:
    if fmt is OutputFormat.TABLE:
        render_rows([dict(vars(p)) for p in summary.partitions], COLUMNS, fmt)
    else:
        render_object(summary.as_dict(), fmt)
    if summary.run is None:
        info("nothing new to load")
    else:
        info(
            f"run {summary.run}: {summary.records} records, {summary.bytes} bytes of Parquet in "
            f"{summary.seconds:.1f}s -> {summary.path}"
        )


@app.command("load")
@cluster_options
def load(
    topics: Annotated[list[str], typer.Argument(metavar="TOPIC...", help="The topics to load.")],
    to: Annotated[
        Path,
        typer.Option(
            "--to",
            metavar="PATH",
            help="The destination directory: one run=N directory per run, with its offsets.",
            file_okay=False,
        ),
    ],
    file_format: Annotated[
        str, typer.Option("--file-format", metavar="FORMAT", help=f"Output files: {', '.join(FILE_FORMATS)}.")
    ] = "parquet",
    master: Annotated[
        str,
        typer.Option("--master", metavar="URL", help="Spark master: local[*], local[N], spark://HOST:PORT."),
    ] = "local[*]",
    value_format: Annotated[
        str,
        typer.Option(
            "--value-format",
            metavar="FORMAT",
            help="Decode values as raw (bytes), utf8 (text) or json (a struct; see --json-schema).",
        ),
    ] = "raw",
    key_format: Annotated[
        str, typer.Option("--key-format", metavar="FORMAT", help="Decode keys as raw (bytes) or utf8.")
    ] = "raw",
    json_schema: Annotated[
        str | None,
        typer.Option(
            "--json-schema",
            metavar="DDL",
            help="The JSON values' schema, e.g. 'id long, name string' (default: inferred from the values).",
            show_default=False,
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="JSON",
            help='Load up to these offsets, e.g. \'{"orders": {"0": 1000}}\' (default: the end offsets now).',
            show_default=False,
        ),
    ] = None,
    min_partitions: Annotated[
        int | None,
        typer.Option(
            "--min-partitions", metavar="N", min=1, help="Split the ranges into at least N Spark tasks."
        ),
    ] = None,
    fail_on_data_loss: Annotated[
        bool,
        typer.Option(
            "--fail-on-data-loss/--no-fail-on-data-loss",
            help="Fail when records to load were deleted (retention) instead of loading what is left.",
        ),
    ] = True,
    spark_conf: Annotated[
        list[str] | None,
        typer.Option("--conf", metavar="KEY=VALUE", help="A Spark setting (repeatable)."),
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Run the load (without it, only print the plan).")
    ] = False,
    output_format: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """Load TOPICs into Parquet under --to PATH with Spark, exactly once across runs.

    Each run reads from where the previous run's stored offsets end (the log start for partitions
    never loaded) up to the end offsets seen at its start, in parallel over partition ranges, and
    writes `PATH/run=N/topic=T/date=YYYY-MM-DD/*.parquet` with the offsets it covered in
    `PATH/run=N/_kctl_offsets.json`; output and offsets become visible together (one rename), so a run
    that dies leaves nothing visible and the next run redoes its ranges. Read it all back with
    `spark.read.parquet(PATH)`. Without --execute, prints the plan only.
    """
    from kctl.client import ConsumerConfig
    from kctl.spark.load import VALUE_FORMATS, LoadError, LoadSummary, plan_load, run_load
    from kctl.spark.options import SourceOptionError

    if file_format not in FILE_FORMATS:
        raise KctlError(f"--file-format must be one of {', '.join(FILE_FORMATS)}", ExitCode.USAGE)
    if value_format not in VALUE_FORMATS:
        raise KctlError(f"--value-format must be one of {', '.join(VALUE_FORMATS)}", ExitCode.USAGE)
    if key_format not in ("raw", "utf8"):
        raise KctlError("--key-format must be raw or utf8", ExitCode.USAGE)
    if json_schema is not None and value_format != "json":
        raise KctlError("--json-schema goes with --value-format json", ExitCode.USAGE)
    conf = _spark_conf(spark_conf)
    bound = _until(until)
    resolved = load_config(cluster.config_file, cluster.overrides, bootstrap_server=cluster.bootstrap_server)
    properties = known_properties(resolved, ConsumerConfig.known_keys(), "consumer")
    bootstrap = resolved.bootstrap_servers
    fmt = OutputFormat(output_format)
    try:
        with client_errors():
            plan = plan_load(bootstrap, properties, topics, to, bound)
    except (LoadError, SourceOptionError) as error:
        raise KctlError(str(error)) from None
    if not execute:
        rows = _plan_rows(plan)
        if fmt is OutputFormat.TABLE:
            render_rows(rows, COLUMNS, fmt)
        else:
            render_object({"run": plan.run, "records": plan.records, "partitions": rows}, fmt)
        info(f"dry run: run {plan.run} would load {plan.records} offsets; add --execute to load them")
        return
    if plan.empty:  # no Spark needed
        _report(LoadSummary(None, None, 0, 0, 0.0, list(plan.partitions)), fmt)
        return
    try:
        from kctl.spark.session import spark_session

        spark = spark_session(master, "kctl spark load", conf)
    except ImportError as error:
        raise KctlError(f"kctl spark needs PySpark: pip install 'kctl[spark]' ({error})") from None
    try:
        with progress() as bar:
            task = bar.add_task(f"run {plan.run}: tasks", total=None)
            summary = run_load(
                spark,
                plan,
                bootstrap,
                properties,
                value_format=value_format,
                key_format=key_format,
                json_schema=json_schema,
                min_partitions=min_partitions,
                fail_on_data_loss=fail_on_data_loss,
                on_progress=lambda done, total: bar.update(task, completed=done, total=total or None),
            )
    except LoadError as error:
        raise KctlError(str(error)) from None
    except Exception as error:  # a failed Spark job: its first line says why
        if type(error).__module__.startswith(("pyspark", "py4j")):
            raise KctlError(f"the Spark job failed: {_job_failure(error)}") from None
        raise
    finally:
        spark.stop()
    _report(summary, fmt)


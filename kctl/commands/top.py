"""`kctl top`: a live view of a running cluster (kctl.console.top_view), from the admin API and the
brokers' Prometheus metrics (kctl.client.top); `--once` prints one snapshot for scripts."""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from kctl.commands.options import DEFAULT_FORMAT, ClusterOptions, FormatOption, cluster_options
from kctl.commands.output import OutputFormat, render_object, warn

app = typer.Typer(  # one command: its help is the docstring of `top`
    invoke_without_command=True,
    subcommand_metavar="",
)


@app.callback()
@cluster_options
def top(
    once: Annotated[
        bool,
        typer.Option("--once", help="Print one snapshot (rates over --interval) and exit, for scripts."),
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            "-n",
            min=0.1,
            metavar="SECONDS",
            help="Seconds between refreshes; with --once, between the two scrapes the rates come from.",
        ),
    ] = 1.0,
    rows: Annotated[
        int, typer.Option("--rows", min=1, metavar="N", help="Topics, partitions and groups shown at most.")
    ] = 10,
    fmt: FormatOption = DEFAULT_FORMAT,
    *,
    cluster: ClusterOptions,
) -> None:
    """A live view of a running cluster, refreshed every second, as top: its brokers (alive, the
    controller, partitions led, requests/s, bytes in and out per second, event-loop busy), its busiest
    topics (records/s and bytes/s in and out; records out from kctl's own counter), the partitions
    under-replicated or offline, and the consumer groups with their lag and its trend (the change per
    second).

    The rates come from each broker's Prometheus /metrics (`metrics.listener`, found with
    DescribeConfigs); a broker without a metrics endpoint, or whose endpoint does not answer, says so
    in its row and has no rates. Leadership, partitions and groups come from the admin API (Metadata,
    DescribeCluster, ListGroups, OffsetFetch, ListOffsets). Keys: `s` cycles the topics' sort (bytes
    in, bytes out, records in, records out, name; `S` back), `/` filters topics, partitions and groups by name
    (Enter applies, Esc cancels; Esc clears it), `q` quits.

    --once prints one snapshot and exits: json/jsonl one object {"time", "interval_s", "cluster_id",
    "controller_id", "brokers", "topics", "partitions", "groups", "notes"} (rates per second, null where
    unknown), table the screen once. Exit status 0; 3 when no broker can be reached."""
    from kctl.client.top import TopCollector
    from kctl.commands.clients import admin_session
    from kctl.console.top_view import ViewState, render, run_live

    state = ViewState(limit=rows)
    with admin_session(*cluster) as admin:
        collector = TopCollector(admin)
        if not once:
            from rich.console import Console

            run_live(collector.refresh, Console(), interval=interval, state=state)
            return
        collector.refresh()
        time.sleep(interval)  # the second scrape: the rates are the counters' change over this
        snapshot = collector.refresh()
    if fmt is OutputFormat.TABLE:
        from rich.console import Console

        Console(file=sys.stdout, highlight=False).print(render(snapshot, state))
    else:
        render_object(snapshot.document(), fmt)
    for note in snapshot.notes:
        warn(note)

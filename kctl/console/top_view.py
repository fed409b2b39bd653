"""`kctl top`'s live terminal view: a rich ``Live`` screen redrawn from a fresh
:class:`~kctl.client.top.TopSnapshot` every interval, and the keys a person uses on it:

- ``s`` cycles the sort of the topics (bytes in, bytes out, records in, name), ``S`` goes back;
- ``/`` starts a filter (typed on the bottom line; Enter applies it, Esc drops it): only the topics,
  partitions and groups whose name contains it are shown;
- ``q`` (or Ctrl-C) quits.

Keys are read from the terminal in cbreak mode (one key at a time, no echo) between redraws; without
a terminal on stdin the view only refreshes until interrupted."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from kctl.client.top import TopicRow, TopSnapshot

#: the topics' sort orders `s` cycles through: (TopicRow field, label); rates sort busiest first
SORTS: tuple[tuple[str, str], ...] = (
    ("bytes_in_per_s", "bytes in"),
    ("bytes_out_per_s", "bytes out"),
    ("records_in_per_s", "records in"),
    ("records_out_per_s", "records out"),
    ("topic", "name"),
)
ESCAPE, ENTER, BACKSPACE = "\x1b", ("\r", "\n"), ("\x7f", "\b")


@dataclasses.dataclass
class ViewState:
    """What the keys change: the sort, the filter (and the one being typed), whether to quit."""

    sort: int = 0
    filter: str = ""
    editing: str | None = None  # the filter being typed after `/`
    quit: bool = False
    limit: int = 10  # rows of topics, partitions and groups shown

    @property
    def sort_field(self) -> str:
        return SORTS[self.sort][0]

    @property
    def sort_label(self) -> str:
        return SORTS[self.sort][1]

    def key(self, key: str) -> None:
        """Apply one key."""
        if self.editing is not None:
            if key == ESCAPE:
                self.editing = None
            elif key in ENTER:
                self.filter, self.editing = self.editing, None
            elif key in BACKSPACE:
                self.editing = self.editing[:-1]
            elif key.isprintable():
                self.editing += key
            return
        if key == "q":
            self.quit = True
        elif key == "s":
            self.sort = (self.sort + 1) % len(SORTS)
        elif key == "S":
            self.sort = (self.sort - 1) % len(SORTS)
        elif key == "/":
            self.editing = self.filter
        elif key == ESCAPE:
            self.filter = ""

    def shown(self, name: str) -> bool:
        return self.filter.lower() in name.lower()

    def sorted_topics(self, topics: tuple[TopicRow, ...]) -> list[TopicRow]:
        rows = [t for t in topics if self.shown(t.topic)]
        field = self.sort_field
        if field == "topic":
            return sorted(rows, key=lambda t: t.topic)
        return sorted(rows, key=lambda t: (-(getattr(t, field) or 0.0), t.topic))


# -- rendering -----------------------------------------------------------------------------------
def _bytes_rate(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}/s" if unit == "B" else f"{value:.1f} {unit}/s"
        value /= 1024
    return "-"  # not reached


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}/s"


def _trend(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) < 0.05:
        return "steady"
    return f"{'+' if value > 0 else ''}{value:,.1f}/s"


def render(snapshot: TopSnapshot, state: ViewState) -> RenderableType:
    """The whole screen for one snapshot."""
    stamp = time.strftime("%H:%M:%S", time.localtime(snapshot.taken_at))
    live = sum(b.alive for b in snapshot.brokers)
    header = Text(
        f"kctl top — cluster {snapshot.cluster_id or '?'}, {live}/{len(snapshot.brokers)} brokers alive, "
        f"controller {snapshot.controller_id if snapshot.controller_id >= 0 else 'none'}, {stamp}"
        f"   sort: {state.sort_label}" + (f"   filter: {state.filter}" if state.filter else ""),
        style="bold",
    )
    brokers = Table(title="brokers", title_justify="left", expand=True)
    for column in ("ID", "ALIVE", "CTRL", "LEADS", "REQ/S", "IN", "OUT", "LOOP BUSY", "METRICS"):
        brokers.add_column(column, justify="left" if column in ("ID", "METRICS") else "right")
    for b in snapshot.brokers:
        brokers.add_row(
            str(b.broker_id),
            "yes" if b.alive else Text("DOWN", style="bold red"),
            "*" if b.controller else "",
            str(b.partitions_led),
            _rate(b.request_rate),
            _bytes_rate(b.bytes_in_per_s),
            _bytes_rate(b.bytes_out_per_s),
            "-" if b.loop_busy is None else f"{b.loop_busy:.0%}",
            Text(b.metrics_error, style="yellow") if b.metrics_error else (b.metrics_url or ""),
        )
    topics = Table(title=f"topics (busiest by {state.sort_label})", title_justify="left", expand=True)
    for column in ("TOPIC", "PARTS", "RECORDS IN", "BYTES IN", "RECORDS OUT", "BYTES OUT"):
        topics.add_column(column, justify="left" if column == "TOPIC" else "right")
    shown_topics = state.sorted_topics(snapshot.topics)
    for t in shown_topics[: state.limit]:
        topics.add_row(
            t.topic, str(t.partitions), _rate(t.records_in_per_s), _bytes_rate(t.bytes_in_per_s),
            _rate(t.records_out_per_s), _bytes_rate(t.bytes_out_per_s),
        )  # fmt: skip
    parts = [p for p in snapshot.partitions if state.shown(p.topic)]
    partitions = Table(title="partitions under-replicated or offline", title_justify="left", expand=True)
    for column in ("TOPIC", "PARTITION", "STATE", "LEADER", "REPLICAS", "ISR"):
        partitions.add_column(column)
    for p in parts[: state.limit]:
        style = "red" if p.state == "offline" else "yellow"
        leader = str(p.leader) if p.leader >= 0 else "none"
        replicas, isr = ",".join(map(str, p.replicas)), ",".join(map(str, p.isr))
        partitions.add_row(p.topic, str(p.partition), Text(p.state, style=style), leader, replicas, isr)
    if not parts:
        partitions.add_row("none", "", "", "", "", "")
    groups = Table(title="consumer groups (by lag)", title_justify="left", expand=True)
    for column in ("GROUP", "STATE", "MEMBERS", "LAG", "TREND"):
        groups.add_column(column, justify="left" if column in ("GROUP", "STATE") else "right")
    shown_groups = sorted((g for g in snapshot.groups if state.shown(g.group)), key=lambda g: -(g.lag or 0))
    for g in shown_groups[: state.limit]:
        groups.add_row(
            g.group, g.state, str(g.members), "-" if g.lag is None else f"{g.lag:,}", _trend(g.lag_per_s)
        )
    more = [
        f"{len(rows) - state.limit} more {what}"
        for rows, what in ((shown_topics, "topics"), (parts, "partitions"), (shown_groups, "groups"))
        if len(rows) > state.limit
    ]
    if state.editing is not None:
        footer = Text(f"filter: {state.editing}_   (Enter: apply, Esc: cancel)", style="reverse")
    else:
        footer = Text(
            "q quit   s sort   / filter   Esc clear filter" + (f"   ({', '.join(more)})" if more else "")
        )
    notes = [Text(note, style="yellow") for note in snapshot.notes]
    return Group(header, brokers, topics, partitions, groups, *notes, footer)


# -- the live loop -------------------------------------------------------------------------------
@contextlib.contextmanager
def _cbreak(fd: int | None) -> Iterator[None]:
    """The terminal in cbreak mode (keys one at a time, no echo) while inside; restored after."""
    if fd is None:
        yield
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def run_live(
    refresh: Callable[[], TopSnapshot],
    console: Console,
    *,
    interval: float = 1.0,
    state: ViewState | None = None,
) -> None:
    """Show the view, refreshed every ``interval`` seconds and redrawn at each key, until `q`."""
    from rich.live import Live

    state = state or ViewState()
    fd = sys.stdin.fileno() if sys.stdin.isatty() else None
    snapshot = refresh()
    with _cbreak(fd), Live(render(snapshot, state), console=console, screen=True, auto_refresh=False) as live:
        next_refresh = time.monotonic() + interval
        while not state.quit:
            wait = max(next_refresh - time.monotonic(), 0.0)
            if fd is not None:
                ready, _, _ = select.select([fd], [], [], wait)
                if ready:
                    for key in os.read(fd, 64).decode(errors="replace"):
                        state.key(key)
            else:
                time.sleep(wait)  # no terminal to read keys from: refresh only
            if state.quit:
                break
            if time.monotonic() >= next_refresh:
                snapshot = refresh()
                next_refresh = time.monotonic() + interval
            live.update(render(snapshot, state), refresh=True)

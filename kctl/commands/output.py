"""Output rendering, implemented once for every command: data to stdout, diagnostics to stderr.

Formats (`--format`):

- ``table``: a rich table when stdout is a terminal; plain aligned text when it is not (one header
  line, one line per row, no borders, no title, so `awk`/`cut` work; empty values print as ``-``).
- ``json``: one pretty-printed JSON array of objects (keys in column order).
- ``jsonl``: one compact JSON object per line, flushed line by line (for pipelines and streams).

JSON conventions (`json_safe`): bytes that are valid UTF-8 become a JSON string, other bytes
``{"base64": "<standard base64>"}`` (`kctl.console.formats.bytes_to_json`, lossless both ways:
`bytes_from_json` there reverses it); None
becomes null, non-finite floats the strings "NaN", "Infinity", "-Infinity", enums their value,
datetimes ISO 8601 strings, paths strings, dataclasses objects, sets sorted arrays.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal, TextIO

from rich.console import Console

from kctl.console.formats import bytes_to_json

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn

# rich's tables and progress bars and tabulate are imported where they are used: `kctl --version`,
# `--help` and the offline log tools start without them (tests/cli/test_cli_startup.py).


class OutputFormat(enum.StrEnum):
    """The values of the shared `--format` option."""

    TABLE = "table"
    JSON = "json"
    JSONL = "jsonl"


@dataclass(frozen=True)
class Column:
    """One output column: `key` in the row mappings (and in JSON), how it looks in a table."""

    key: str
    header: str | None = None
    """Table header; default: the key in upper case with `_` as `-` (`log_start` -> `LOG-START`)."""
    justify: Literal["left", "right"] | None = None
    """Table alignment; default: right when every value is a number, else left."""
    formatter: Callable[[Any], str] | None = None
    """Table display of a value; JSON output always gets the raw value."""
    size: bool = False
    """A size in bytes: tables show it human-readable (`format_size`: 1.5MiB) unless the command
    was asked for exact bytes (`--bytes`: `render_rows(..., exact_sizes=True)`); negative: `-`."""

    @property
    def title(self) -> str:
        return self.header if self.header is not None else self.key.upper().replace("_", "-")


stderr_console = Console(stderr=True, highlight=False)
"""The diagnostics console: messages and progress go to stderr, never to stdout."""


def json_safe(value: Any) -> Any:
    """`value` as something `json.dumps` accepts and renders losslessly (see the module docstring)."""
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes_to_json(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_safe(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        items = [json_safe(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return str(value)


def _dumps(value: Any, *, pretty: bool) -> str:
    if pretty:
        return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


_CONTROL_ESCAPES = {i: f"\\x{i:02x}" for i in range(0x20)} | {
    0x7F: "\\x7f",
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
}


def format_cell(value: Any) -> str:
    """A value as one line of table text: None as `-`, "" as `""`, bytes as text, control chars escaped."""
    if value is None:
        return "-"
    if isinstance(value, enum.Enum):
        return format_cell(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes | bytearray | memoryview):
        text = bytes(value).decode("utf-8", errors="backslashreplace")
    elif isinstance(value, str):
        text = value or '""'  # an empty cell would shift the columns of the plain text
    elif isinstance(value, int | float):
        return str(value)
    elif isinstance(value, Mapping | list | tuple | set | frozenset) or dataclasses.is_dataclass(value):
        text = _dumps(json_safe(value), pretty=False)
    else:
        text = str(value)
    return text.translate(_CONTROL_ESCAPES)


def _as_columns(columns: Sequence[Column | str]) -> list[Column]:
    return [c if isinstance(c, Column) else Column(c) for c in columns]


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _justify(column: Column, rows: Sequence[Mapping[str, Any]]) -> Literal["left", "right"]:
    if column.justify is not None:
        return column.justify
    values = [row.get(column.key) for row in rows if row.get(column.key) is not None]
    return "right" if values and all(_is_number(v) for v in values) else "left"


_SIZE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_size(value: float) -> str:
    """Bytes as a table shows them: `512B`, `1.5KiB`, `3.0MiB` (binary units, one decimal, no
    blank so `awk` sees one field); a negative size (unknown) as `-`."""
    if value < 0:
        return "-"
    if value < 1024:
        return f"{int(value)}B"
    amount = float(value)
    for unit in _SIZE_UNITS:
        amount /= 1024
        if amount < 1024 or unit == _SIZE_UNITS[-1]:
            return f"{amount:.1f}{unit}"
    raise AssertionError("unreachable")


def _table_cell(column: Column, value: Any, exact_sizes: bool = False) -> str:
    if column.size and _is_number(value):
        return format_size(value) if not exact_sizes else ("-" if value < 0 else str(value))
    if value is None or column.formatter is None:
        return format_cell(value)
    return column.formatter(value).translate(_CONTROL_ESCAPES)


def _render_table(
    rows: Sequence[Mapping[str, Any]],
    columns: list[Column],
    title: str | None,
    out: TextIO,
    exact_sizes: bool = False,
) -> None:
    cells = [[_table_cell(c, row.get(c.key), exact_sizes) for c in columns] for row in rows]
    aligns = [_justify(c, rows) for c in columns]
    if _is_terminal(out):
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, box=box.SIMPLE_HEAD, highlight=False)
        for column, align in zip(columns, aligns, strict=True):
            table.add_column(Text(column.title), justify=align, overflow="fold")
        for line in cells:
            table.add_row(*(Text(cell) for cell in line))
        Console(file=out, highlight=False).print(table)
        return
    from tabulate import tabulate

    text = tabulate(
        cells,
        headers=[c.title for c in columns],
        tablefmt="plain",
        disable_numparse=True,
        colalign=aligns,
    )
    out.write(text + "\n")


def render_rows(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[Column | str],
    fmt: OutputFormat | str,
    *,
    title: str | None = None,
    out: TextIO | None = None,
    exact_sizes: bool = False,
) -> None:
    """Write `rows` (mappings; only `columns` are shown, in that order) to stdout in `fmt`.

    With ``jsonl`` the rows may be a lazy iterable (a live stream): each is written and flushed as
    it comes. The other formats need all rows first. ``exact_sizes``: size columns of a table in
    bytes rather than human-readable (`--bytes`).
    """
    out = out if out is not None else sys.stdout
    fmt = OutputFormat(fmt)
    cols = _as_columns(columns)
    if fmt is OutputFormat.JSONL:
        for row in rows:
            out.write(_dumps({c.key: json_safe(row.get(c.key)) for c in cols}, pretty=False) + "\n")
            out.flush()
        return
    materialized = list(rows)
    if fmt is OutputFormat.JSON:
        data = [{c.key: json_safe(row.get(c.key)) for c in cols} for row in materialized]
        out.write(_dumps(data, pretty=True) + "\n")
    else:
        _render_table(materialized, cols, title, out, exact_sizes)
    out.flush()


def render_object(
    obj: Mapping[str, Any],
    fmt: OutputFormat | str,
    *,
    title: str | None = None,
    out: TextIO | None = None,
) -> None:
    """Write one object: a KEY/VALUE table, a pretty JSON object, or one JSON line."""
    out = out if out is not None else sys.stdout
    fmt = OutputFormat(fmt)
    if fmt is OutputFormat.TABLE:
        rows = [{"key": key, "value": value} for key, value in obj.items()]
        _render_table(rows, _as_columns(["key", "value"]), title, out)
    else:
        out.write(_dumps(json_safe(obj), pretty=fmt is OutputFormat.JSON) + "\n")
    out.flush()


def render_documents(
    documents: Iterable[Mapping[str, Any]],
    fmt: OutputFormat | str,
    *,
    out: TextIO | None = None,
) -> None:
    """Write whole objects (all their keys, nested values allowed), e.g. heterogeneous records.

    ``json``: one array; ``jsonl``: one object per line, streamed and flushed; ``table``: each
    document as a KEY/VALUE table (commands usually pick columns and call `render_rows` instead).
    """
    out = out if out is not None else sys.stdout
    fmt = OutputFormat(fmt)
    if fmt is OutputFormat.JSONL:
        for document in documents:
            out.write(_dumps(json_safe(document), pretty=False) + "\n")
            out.flush()
    elif fmt is OutputFormat.JSON:
        out.write(_dumps([json_safe(document) for document in documents], pretty=True) + "\n")
        out.flush()
    else:
        for document in documents:
            render_object(document, fmt, out=out)


def warn(message: str) -> None:
    """Print `kctl: warning: <message>` to stderr (no markup, no wrapping)."""
    stderr_console.print(f"kctl: warning: {message}", markup=False, highlight=False, soft_wrap=True)


def info(message: str) -> None:
    """Print `kctl: <message>` to stderr (no markup, no wrapping)."""
    stderr_console.print(f"kctl: {message}", markup=False, highlight=False, soft_wrap=True)


def progress(*columns: ProgressColumn | str, transient: bool = True) -> Progress:
    """A rich Progress on stderr; it draws nothing when stderr is not a terminal.

    Use it as a context manager: ``with progress() as p: task = p.add_task("scan", total=n)``.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    if not columns:
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        )
    return Progress(
        *columns,
        console=stderr_console,
        transient=transient,
        disable=not _is_terminal(sys.stderr),
    )

"""kctl.commands.output: table / json / jsonl rendering, JSON conventions, stderr diagnostics."""

from __future__ import annotations

import datetime as dt
import enum
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kctl.commands import output
from kctl.commands.output import (
    Column,
    OutputFormat,
    format_cell,
    format_size,
    json_safe,
    render_documents,
    render_object,
    render_rows,
)
from kctl.console.formats import bytes_from_json


class Tty(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class FlushCounter(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes: list[str] = []

    def flush(self) -> None:
        self.flushes.append(self.getvalue())
        super().flush()


class Color(enum.Enum):
    RED = "red"


class Opaque:
    def __str__(self) -> str:
        return "opaque!"


@dataclass
class Point:
    x: int
    y: bytes


ROWS = [
    {"topic": "orders", "partition": 0, "offset": 1234, "key": b"\x00\xffk", "extra": "dropped"},
    {"topic": "payments [bold]x[/bold]", "partition": 11, "offset": None, "key": None},
]
COLUMNS = ["topic", "partition", Column("offset", header="LOG-END"), "key"]


def test_json_safe_conventions() -> None:
    assert json_safe(None) is None
    assert json_safe(b"\x00\xff") == {"base64": "AP8="}
    assert json_safe(b"k\x00\xc3\xa9") == "k\x00é"  # valid UTF-8 stays readable
    assert json_safe(bytearray(b"ab")) == "ab"
    assert json_safe(memoryview(b"\xff")) == {"base64": "/w=="}
    assert json_safe(float("nan")) == "NaN"
    assert json_safe(float("inf")) == "Infinity"
    assert json_safe(float("-inf")) == "-Infinity"
    assert json_safe(1.5) == 1.5
    assert json_safe(Color.RED) == "red"
    assert json_safe(OutputFormat.JSON) == "json"
    assert json_safe(dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)) == "2024-01-02T03:04:05+00:00"
    assert json_safe(Path("/a/b")) == "/a/b"
    assert json_safe({1: (b"\xfe", {2, 1})}) == {"1": [{"base64": "/g=="}, [1, 2]]}
    assert json_safe(Point(1, b"y")) == {"x": 1, "y": "y"}
    assert json_safe(Opaque()) == "opaque!"
    assert type(json_safe(OutputFormat.JSON)) is str
    json.dumps(json_safe({"all": [b"", float("nan"), Color.RED, Point(0, b"")]}), allow_nan=False)


def test_bytes_round_trip_through_json() -> None:
    for data in (b"", b"text", b"\x00\xff\xfe", "é€😀".encode(), bytes(range(256))):
        assert bytes_from_json(json.loads(json.dumps(json_safe(data)))) == data
    with pytest.raises(ValueError):
        bytes_from_json({"hex": "00"})  # type: ignore[arg-type]


def test_json_is_one_array_in_column_order() -> None:
    out = io.StringIO()
    render_rows(ROWS, COLUMNS, "json", out=out)
    data = json.loads(out.getvalue())
    assert data == [
        {"topic": "orders", "partition": 0, "offset": 1234, "key": {"base64": "AP9r"}},
        {"topic": "payments [bold]x[/bold]", "partition": 11, "offset": None, "key": None},
    ]
    assert [list(row) for row in data] == [["topic", "partition", "offset", "key"]] * 2
    assert out.getvalue().endswith("]\n")


def test_jsonl_is_one_object_per_line_flushed_each() -> None:
    out = FlushCounter()
    render_rows(ROWS, COLUMNS, OutputFormat.JSONL, out=out)
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["topic"] for line in lines] == ["orders", "payments [bold]x[/bold]"]
    assert out.flushes[:2] == [lines[0] + "\n", lines[0] + "\n" + lines[1] + "\n"]


def test_jsonl_streams_a_lazy_iterable() -> None:
    out = io.StringIO()

    def rows() -> Iterator[dict[str, int]]:
        for i in range(3):
            assert out.getvalue().count("\n") == i  # earlier rows are out before the next is made
            yield {"n": i}

    render_rows(rows(), ["n"], "jsonl", out=out)
    assert out.getvalue() == '{"n":0}\n{"n":1}\n{"n":2}\n'


def test_plain_table_when_not_a_terminal() -> None:
    out = io.StringIO()
    render_rows(ROWS, COLUMNS, "table", title="Offsets", out=out)
    lines = out.getvalue().splitlines()
    assert lines == [
        "TOPIC                      PARTITION    LOG-END  KEY",
        "orders                             0       1234  \\x00\\xffk",
        "payments [bold]x[/bold]           11          -  -",
    ]


def test_plain_table_keeps_each_row_on_one_line() -> None:
    out = io.StringIO()
    render_rows([{"v": "a\nb\tc\x1b[31m"}], ["v"], "table", out=out)
    assert out.getvalue() == "V\na\\nb\\tc\\x1b[31m\n"


def test_empty_rows() -> None:
    for fmt, expected in (("json", "[]\n"), ("jsonl", ""), ("table", "A    B\n")):
        out = io.StringIO()
        render_rows([], ["a", "b"], fmt, out=out)
        assert out.getvalue() == expected, fmt


def test_rich_table_on_a_terminal_shows_title_and_literal_brackets() -> None:
    out = Tty()
    render_rows(ROWS, COLUMNS, "table", title="Offsets", out=out)
    text = out.getvalue()
    assert "Offsets" in text
    assert "payments [bold]x[/bold]" in text  # data is never taken as rich markup
    assert "1234" in text and "LOG-END" in text


def test_column_header_default_and_formatter() -> None:
    assert Column("log_start").title == "LOG-START"
    out = io.StringIO()
    render_rows(
        [{"size": 2048}, {"size": None}],
        [Column("size", formatter=lambda n: f"{n // 1024} KiB", justify="left")],
        "table",
        out=out,
    )
    assert out.getvalue() == "SIZE\n2 KiB\n-\n"
    out = io.StringIO()
    render_rows([{"size": 2048}], [Column("size", formatter=lambda n: f"{n // 1024} KiB")], "json", out=out)
    assert json.loads(out.getvalue()) == [{"size": 2048}]


def test_format_cell() -> None:
    assert format_cell(None) == "-"
    assert format_cell(True) == "true"
    assert format_cell(3.5) == "3.5"
    assert format_cell(Color.RED) == "red"
    assert format_cell({"a": [1, b"\xff"]}) == '{"a":[1,{"base64":"/w=="}]}'
    assert format_cell(b"text") == "text"
    assert format_cell("") == '""'


def test_render_object() -> None:
    obj = {"cluster_id": "abc", "brokers": 3, "controller": None}
    out = io.StringIO()
    render_object(obj, "table", out=out)
    assert out.getvalue().splitlines() == [
        "KEY         VALUE",
        "cluster_id  abc",
        "brokers     3",
        "controller  -",
    ]
    out = io.StringIO()
    render_object(obj, "json", out=out)
    assert json.loads(out.getvalue()) == obj
    out = io.StringIO()
    render_object(obj, "jsonl", out=out)
    assert out.getvalue() == '{"cluster_id":"abc","brokers":3,"controller":null}\n'


def test_render_documents_keeps_every_key_and_nesting() -> None:
    docs = [{"type": "batch", "records": [{"key": b"k", "value": b"\xff"}]}, {"type": "index", "entry": 0}]
    out = FlushCounter()
    render_documents(iter(docs), "jsonl", out=out)
    assert out.getvalue() == (
        '{"type":"batch","records":[{"key":"k","value":{"base64":"/w=="}}]}\n{"type":"index","entry":0}\n'
    )
    assert len(out.flushes) == 2
    out = io.StringIO()
    render_documents(docs, "json", out=out)
    assert json.loads(out.getvalue())[1] == {"type": "index", "entry": 0}
    out = io.StringIO()
    render_documents(docs[1:], "table", out=out)
    assert out.getvalue().splitlines() == ["KEY    VALUE", "type   index", "entry  0"]


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(ValueError):
        render_rows([], ["a"], "xml", out=io.StringIO())


def test_default_output_is_the_current_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    render_rows([{"a": 1}], ["a"], "jsonl")
    render_object({"a": 1}, "json")
    captured = capsys.readouterr()
    assert captured.out == '{"a":1}\n{\n  "a": 1\n}\n'
    assert captured.err == ""


def test_diagnostics_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    long = "x" * 300 + " [red]not markup[/red]"
    output.warn(long)
    output.info("done")
    output.stderr_console.print("progress note")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"kctl: warning: {long}\nkctl: done\nprogress note\n"


def test_progress_is_silent_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with output.progress() as bar:
        task = bar.add_task("scanning", total=3)
        for _ in range(3):
            bar.advance(task)
    assert bar.disable
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.parametrize(
    ("size", "shown"),
    [(0, "0B"), (1023, "1023B"), (1024, "1.0KiB"), (1536, "1.5KiB"), (5 * 1024**3, "5.0GiB"), (-1, "-")],
)
def test_format_size(size: int, shown: str) -> None:
    assert format_size(size) == shown


def test_size_columns_human_in_tables_exact_with_bytes_and_in_json() -> None:
    rows = [{"size": 3 * 1024 * 1024}, {"size": -1}, {"size": None}]
    columns = [Column("size", size=True)]
    out = io.StringIO()
    render_rows(rows, columns, "table", out=out)
    assert out.getvalue().split() == ["SIZE", "3.0MiB", "-", "-"]
    out = io.StringIO()
    render_rows(rows, columns, "table", out=out, exact_sizes=True)
    assert out.getvalue().split() == ["SIZE", "3145728", "-", "-"]
    out = io.StringIO()
    render_rows(rows, columns, "json", out=out)
    assert [r["size"] for r in json.loads(out.getvalue())] == [3145728, -1, None]

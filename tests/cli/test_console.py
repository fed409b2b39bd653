"""kctl.console without a broker: parsing input lines and JSON lines into records, the header
option, the JSON envelope (bytes as text or {"base64": ...}) read back by the JSON-lines parser,
record templates, readable timestamps and the console consumer's default start."""

from __future__ import annotations

import io
import json

import pytest

from kctl.client.consumer import ConsumerRecord, TimestampType
from kctl.console.consume import default_spec
from kctl.console.formats import (
    JsonLinesEncoder,
    RecordTemplate,
    bytes_from_json,
    bytes_to_json,
    compile_template,
    readable_timestamp,
    record_envelope,
)
from kctl.console.produce import (
    InputError,
    InputRecord,
    jsonl_parser,
    line_parser,
    parse_delimiter,
    parse_header,
    split_records,
)

RECORD = ConsumerRecord(
    topic="orders",
    partition=2,
    offset=41,
    timestamp=1_700_000_000_123,
    timestamp_type=TimestampType.CREATE_TIME,
    key=b"k\xff",
    value="välue".encode(),
    headers=(("h", b"1"), ("bin", b"\x00\xfe"), ("h", None)),
)


# -- lines ------------------------------------------------------------------------------------------
def test_lines_split_at_the_first_separator_and_keep_the_rest() -> None:
    extra = [("src", b"cli")]
    parse = line_parser(b"::", None, extra)
    assert parse(b"user-1::a::b\n") == InputRecord(b"user-1", b"a::b", extra)
    assert parse(b"no separator\n") == InputRecord(None, b"no separator", extra)
    assert parse(b"::value") == InputRecord(b"", b"value", extra)  # the last line may lack \n
    assert parse(b"key::\n") == InputRecord(b"key", b"", extra)
    assert parse(b"\xff\x00 binary\r\n").value == b"\xff\x00 binary\r"  # only \n is the line's end


def test_lines_without_separator_and_the_null_marker() -> None:
    parse = line_parser(None, b"NULL", [])
    assert parse(b"a:b\n") == InputRecord(None, b"a:b", [])
    assert parse(b"NULL\n").value is None
    assert parse(b"NULLS\n").value == b"NULLS"
    keyed = line_parser(b"=", b"NULL", [])
    assert keyed(b"k=NULL\n") == InputRecord(b"k", None, [])


def test_header_option() -> None:
    assert parse_header("a=b=c") == ("a", b"b=c")
    assert parse_header("empty=") == ("empty", b"")
    assert parse_header("snow=☃") == ("snow", "☃".encode())
    for text in ("novalue", "=value", ""):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_header(text)


# -- JSON lines -------------------------------------------------------------------------------------
def test_the_envelope_reads_back_losslessly() -> None:
    document = record_envelope(RECORD)
    assert document == {
        "topic": "orders",
        "partition": 2,
        "offset": 41,
        "timestamp": 1_700_000_000_123,
        "timestamp_type": "CreateTime",
        "key": {"base64": "a/8="},
        "value": "välue",
        "headers": [["h", "1"], ["bin", {"base64": "AP4="}], ["h", None]],
    }
    line = json.dumps(document, ensure_ascii=False).encode() + b"\n"
    parsed = jsonl_parser(True, True, [("x", b"y")])(line)
    assert parsed == InputRecord(
        RECORD.key, RECORD.value, [*RECORD.headers, ("x", b"y")], RECORD.partition, RECORD.timestamp
    )
    not_kept = jsonl_parser(False, False, [])(line)
    assert not_kept is not None and (not_kept.partition, not_kept.timestamp) == (None, None)


TRICKY_BYTES = [
    None,
    b"",
    b"plain text",
    b'a "quoted" word',
    b"back\\slash \\u0041 \\n",
    bytes(range(0x20)) + b"\x7f",  # every control character, and DEL (written as it is)
    b"\t\n\r\x08\x0c",  # the ones with short escapes
    b"\xff\xfe not UTF-8",
    b"\xe2\x82",  # a cut multi-byte sequence
    b"\xed\xa0\x80",  # an encoded surrogate: not UTF-8
    "välue ünïcode € 😀 \u2028 \u2029 \ufeff".encode(),
    'ünïcode with "quotes" and \\ and \x01'.encode(),
    bytes(range(256)),
    b'"',
    b"\\",
    *(b"a" + bytes([byte]) + b"z" for byte in range(0x20)),  # each control character alone
]


def _json_dumps_line(record: ConsumerRecord) -> bytes:
    """What `kctl consume --format jsonl` wrote before its fast path: json.dumps of the envelope."""
    return (json.dumps(record_envelope(record), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


@pytest.mark.parametrize("timestamp_type", list(TimestampType))
def test_the_fast_json_lines_are_json_dumps_of_the_envelope_byte_for_byte(
    timestamp_type: TimestampType,
) -> None:
    encoder = JsonLinesEncoder()
    checked = 0
    for topic, partition in (("orders", 0), ('tö"pic\\', 7), ("orders", 1), ("orders", 0)):
        for key in TRICKY_BYTES:
            for value in TRICKY_BYTES:
                headers = (
                    ("h", value),
                    ("", None),
                    ('ké"y\\\n\x00', key),
                    ("h", b"repeated"),
                )
                for record_headers in ((), headers):
                    record = ConsumerRecord(
                        topic, partition, 2**40 + checked, -1 if key is None else 1_700_000_000_123,
                        timestamp_type, key, value, record_headers,
                    )
                    assert encoder.encode(record) == _json_dumps_line(record), record
                    checked += 1
    assert checked == 4 * len(TRICKY_BYTES) ** 2 * 2
    line = encoder.encode(RECORD)
    assert json.loads(line) == record_envelope(RECORD)
    assert line == (
        '{"topic":"orders","partition":2,"offset":41,"timestamp":1700000000123,'
        '"timestamp_type":"CreateTime","key":{"base64":"a/8="},"value":"välue",'
        '"headers":[["h","1"],["bin",{"base64":"AP4="}],["h",null]]}\n'
    ).encode()


def test_the_fast_json_lines_take_any_bytes_like_value() -> None:
    record = RECORD._replace(key=bytearray(b"k"), value=memoryview(b"v\xff"), headers=())  # type: ignore[arg-type]
    assert JsonLinesEncoder().encode(record) == _json_dumps_line(record)


def test_bytes_to_and_from_json() -> None:
    for data in (b"", b"text", b"\x00\xff", bytes(range(256))):
        assert bytes_from_json(json.loads(json.dumps(bytes_to_json(data)))) == data
    assert bytes_to_json(None) is None
    assert bytes_to_json(memoryview(b"ok")) == "ok"
    with pytest.raises(ValueError):
        bytes_from_json({"base64": "not base64!"})
    with pytest.raises(ValueError):
        bytes_from_json({"base64": "AA==", "extra": "x"})


def test_json_lines_defaults_blank_lines_and_header_objects() -> None:
    parse = jsonl_parser(True, True, [])
    assert parse(b"   \n") is None
    assert parse(b'{"value": "v"}') == InputRecord(None, b"v", [], None, None)
    assert parse(b'{"headers": {"a": "1", "b": null}}') == InputRecord(None, None, [("a", b"1"), ("b", None)])
    assert parse(b'{"value": "v", "timestamp": -1}').timestamp is None  # no timestamp: the producer's


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"{not json", "invalid JSON"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b'{"key": 5}', '"key"'),
        (b'{"value": {"base64": "@@"}}', '"value"'),
        (b'{"headers": "a=b"}', '"headers" must be a list'),
        (b'{"headers": [["a"]]}', "expected [key, value]"),
        (b'{"headers": [[1, "v"]]}', "with a string key"),
        (b'{"headers": [["a", 7]]}', "'a'"),
        (b'{"partition": -1}', '"partition" must be an integer >= 0'),
        (b'{"partition": "0"}', '"partition" must be an integer >= 0'),
        (b'{"partition": true}', '"partition" must be an integer >= 0'),
        (b'{"timestamp": 1.5}', '"timestamp" must be an integer'),
        (b"\xff\xfe", "invalid JSON"),
    ],
)
def test_json_lines_that_are_not_records(line: bytes, message: str) -> None:
    with pytest.raises(InputError) as caught:
        jsonl_parser(True, True, [])(line)
    assert message in str(caught.value)


# -- templates and timestamps -----------------------------------------------------------------------
def test_templates_render_raw_bytes() -> None:
    template = RecordTemplate(r"%t/%p@%o %T [%k] %v {%h} 100%%\t\\\0\n")
    assert template.render(RECORD) == (
        b"orders/2@41 1700000000123 [k\xff] " + "välue".encode() + b" {h=1,bin=\x00\xfe,h=} 100%\t\\\x00\n"
    )
    empty = RECORD._replace(key=None, value=None, headers=())
    assert RecordTemplate("%k|%v|%h").render(empty) == b"||"
    assert compile_template("plain") == [b"plain"]


@pytest.mark.parametrize(
    ("template", "message"),
    [("%x", "unknown field %x"), (r"\q", "unknown escape"), ("50%", "lone '%'"), ("a\\", "lone '\\\\'")],
)
def test_bad_templates(template: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        compile_template(template)
    assert message in str(caught.value)


def test_readable_timestamps() -> None:
    assert readable_timestamp(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    assert readable_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert readable_timestamp(-1) == "-"
    assert readable_timestamp(10**20) == str(10**20)  # beyond datetime: the number itself


def test_default_start() -> None:
    assert default_spec(None, None) == "end"  # new records, as kcat does
    assert default_spec(None, "end") == "beginning"  # --until alone dumps what is there
    assert default_spec("@-1h", "end") == "@-1h"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (";", b";"),
        ("\\0", b"\0"),
        ("\\t|\\n", b"\t|\n"),
        ("\\x1e", b"\x1e"),
        ("a\\\\b", b"a\\b"),
        ("é", "é".encode()),
    ],
)
def test_parse_delimiter(text: str, expected: bytes) -> None:
    assert parse_delimiter(text) == expected


@pytest.mark.parametrize("text", ["", "\\q", "\\xZZ", "a\\", "\\\\\\"])
def test_parse_delimiter_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_delimiter(text)


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 64])
def test_split_records_across_chunks(chunk_size: int) -> None:
    data = b"ab<>c<><>d\ne<"
    pieces = list(split_records(io.BytesIO(data), b"<>", chunk_size))
    assert pieces == [(1, b"ab"), (2, b"c"), (3, b""), (4, b"d\ne<")]
    assert list(split_records(io.BytesIO(b"x;y;"), b";", chunk_size)) == [(1, b"x"), (2, b"y")]
    assert list(split_records(io.BytesIO(b""), b";", chunk_size)) == []


def test_line_parser_keeps_newlines_of_delimited_records() -> None:
    assert line_parser(None, None, [], strip_newline=False)(b"v\n") == InputRecord(None, b"v\n", [])
    assert line_parser(None, None, [])(b"v\n") == InputRecord(None, b"v", [])

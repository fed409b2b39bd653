"""The console producer: records parsed from lines of input and sent in input order, each outcome
reported in input order.

Input formats: `line_parser` makes one record of every line (optionally `KEY<SEP>VALUE`, a null
marker for tombstones), or of every piece of input between delimiters (`split_records`, kcat -D);
`jsonl_parser` reads the JSON envelope of `kctl.console.formats` (what the console consumer writes),
one per line; `json_array_parser` the same envelopes in one JSON array. `ProduceSession` sends
parsed records as they come (constant memory: the producer's `buffer.memory` applies back-pressure)
and hands each outcome, in input order, to the caller's `on_delivered` / `on_error`.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from kctl.client import KafkaError
from kctl.client.producer import Producer, RecordFuture, RecordMetadata
from kctl.console.formats import bytes_from_json

MAX_UNREPORTED = 1_000_000
"""Records sent whose outcome is not reported yet (kept in input order); more make reading wait."""

Headers = list[tuple[str, bytes | None]]


class InputRecord(NamedTuple):
    """One record parsed from input; partition and timestamp None: the producer picks them."""

    key: bytes | None
    value: bytes | None
    headers: Headers
    partition: int | None = None
    timestamp: int | None = None


Parser = Callable[[bytes], InputRecord | None]
"""Parses one line of input into a record, or None for a line to skip; raises InputError."""


class InputError(ValueError):
    """A line that is not a record."""


class StoppedReading(Exception):
    """The producer refused a record (its buffer stayed full: the broker is gone); reading stopped."""

    def __init__(self, line: int) -> None:
        super().__init__(f"stopped reading at line {line}")
        self.line = line


def parse_header(text: str) -> tuple[str, bytes]:
    """A `KEY=VALUE` header (the value UTF-8 encoded); ValueError for anything else."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError("expected KEY=VALUE")
    return key, value.encode("utf-8")


def _strip_newline(line: bytes) -> bytes:
    return line[:-1] if line.endswith(b"\n") else line


def _keep(line: bytes) -> bytes:
    return line


def line_parser(
    key_separator: bytes | None, null_marker: bytes | None, headers: Headers, *, strip_newline: bool = True
) -> Parser:
    """Lines: the line is the value; with a separator, the key is what precedes its first
    occurrence (a line without it has a null key); a value equal to the null marker is null.
    Every record gets `headers`. ``strip_newline=False`` for pieces that `split_records` cut (they
    hold no delimiter, and a newline in them is data)."""
    strip = _strip_newline if strip_newline else _keep

    def parse(line: bytes) -> InputRecord:
        line = strip(line)
        key: bytes | None = None
        value: bytes | None = line
        if key_separator is not None:
            before, found, after = line.partition(key_separator)
            if found:
                key, value = before, after
        if null_marker is not None and value == null_marker:
            value = None
        return InputRecord(key, value, headers)

    return parse


_DELIMITER_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|.)", re.DOTALL)
_DELIMITER_ESCAPES = {"t": b"\t", "n": b"\n", "r": b"\r", "0": b"\0", "\\": b"\\"}


def parse_delimiter(text: str) -> bytes:
    """A record delimiter as given on the command line (UTF-8), with the escapes \\t \\n \\r \\0
    \\\\ and \\xHH (kcat -D). ValueError for an empty delimiter or an unknown escape."""
    out = bytearray()
    position = 0
    for match in _DELIMITER_ESCAPE.finditer(text):
        out += text[position : match.start()].encode()
        escape = match.group(1)
        if escape.startswith("x") and len(escape) == 3:
            out.append(int(escape[1:], 16))
        elif escape in _DELIMITER_ESCAPES:
            out += _DELIMITER_ESCAPES[escape]
        else:
            raise ValueError(f"unknown escape \\{escape} (known: \\t \\n \\r \\0 \\\\ \\xHH)")
        position = match.end()
    rest = text[position:]
    if "\\" in rest:  # every backslash followed by a character was matched: this one ends the text
        raise ValueError("a lone backslash at the end")
    out += rest.encode()
    if not out:
        raise ValueError("the delimiter must not be empty")
    return bytes(out)


def split_records(stream: BinaryIO, delimiter: bytes, chunk_size: int = 65536) -> Iterator[tuple[int, bytes]]:
    """(record number from 1, bytes) of every piece of ``stream`` between delimiters, as soon as its
    delimiter arrives (streamed, in linear time). What follows the last delimiter is one more record,
    unless it is empty."""
    read = getattr(stream, "read1", stream.read)
    pending = bytearray()
    number = 0
    width = len(delimiter)
    while chunk := read(chunk_size):
        search_from = max(len(pending) - width + 1, 0)
        pending += chunk
        start = 0
        while (found := pending.find(delimiter, max(search_from, start))) >= 0:
            number += 1
            yield number, bytes(pending[start:found])
            start = found + width
        del pending[:start]
    if pending:
        yield number + 1, bytes(pending)


def _json_bytes(document: dict[str, Any], field: str) -> bytes | None:
    value = document.get(field)
    if value is None:
        return None
    try:
        return bytes_from_json(value)
    except (ValueError, TypeError) as error:  # binascii.Error is a ValueError
        raise InputError(f'"{field}": {error}') from None


def _json_headers(raw: Any) -> Headers:
    if raw is None:
        return []
    items = raw.items() if isinstance(raw, dict) else raw
    if not isinstance(raw, dict | list):
        raise InputError('"headers" must be a list of [key, value] pairs or an object')
    headers: Headers = []
    for item in items:
        if not isinstance(item, list | tuple) or len(item) != 2 or not isinstance(item[0], str):
            raise InputError(f'"headers": expected [key, value] with a string key, got {item!r}')
        name, value = item
        try:
            headers.append((name, None if value is None else bytes_from_json(value)))
        except (ValueError, TypeError) as error:
            raise InputError(f'"headers": {name!r}: {error}') from None
    return headers


def envelope_parser(
    keep_partition: bool, keep_timestamp: bool, extra: Headers
) -> Callable[[Any], InputRecord]:
    """One record from a decoded JSON envelope: {"key", "value", "headers", "partition",
    "timestamp", ...} (other fields, e.g. topic and offset, are ignored; "partition" and "timestamp"
    only when kept); `extra` headers are added to each record's own."""

    def parse(document: Any) -> InputRecord:
        if not isinstance(document, dict):
            raise InputError(f"expected a JSON object, got {type(document).__name__}")
        key = _json_bytes(document, "key")
        value = _json_bytes(document, "value")
        headers = _json_headers(document.get("headers"))
        if extra:
            headers += extra
        partition = None
        if keep_partition:
            partition = document.get("partition")
            if partition is not None and (type(partition) is not int or partition < 0):
                raise InputError(f'"partition" must be an integer >= 0, got {partition!r}')
        timestamp = None
        if keep_timestamp:
            timestamp = document.get("timestamp")
            if timestamp is not None and type(timestamp) is not int:
                raise InputError(f'"timestamp" must be an integer (ms since the epoch), got {timestamp!r}')
            if timestamp is not None and timestamp < 0:
                timestamp = None
        return InputRecord(key, value, headers, partition, timestamp)

    return parse


def jsonl_parser(keep_partition: bool, keep_timestamp: bool, extra: Headers) -> Parser:
    """JSON lines, one envelope (see `envelope_parser`) per line; a blank line is skipped (None)."""
    envelope = envelope_parser(keep_partition, keep_timestamp, extra)

    def parse(line: bytes) -> InputRecord | None:
        text = line.strip()
        if not text:
            return None
        try:
            document = json.loads(text)
        except (ValueError, UnicodeDecodeError) as error:
            raise InputError(f"invalid JSON: {error}") from None
        return envelope(document)

    return parse




_INPUT_FIELDS = {"k": "key", "v": "value", "h": "headers", "p": "partition", "T": "timestamp"}


def template_parser(template: str, extra: Headers) -> tuple[bytes, Parser]:
    """Records read with a template, like rpk's ``produce -f '%k %v\\n'``: the template's last literal
    is the record delimiter, the rest is matched against each record (`%k` key, `%v` value, `%h`
    headers as `k=v,k2=v2`, `%p` partition, `%T` timestamp in epoch ms; each at most once). Returns
    (delimiter, parser); ValueError for a template that cannot read records."""
    from kctl.console.formats import template_tokens

    tokens = template_tokens(template)
    if not tokens or not isinstance(tokens[-1], bytes):
        raise ValueError("end the template with the record delimiter, e.g. '%k %v\\n'")
    delimiter, body = tokens[-1], tokens[:-1]
    pattern = b""
    seen: set[str] = set()
    for token in body:
        if isinstance(token, bytes):
            pattern += re.escape(token)
            continue
        if token not in _INPUT_FIELDS:
            raise ValueError(f"%{token} cannot be read from input (fields: %k %v %h %p %T)")
        if token in seen:
            raise ValueError(f"%{token} appears twice in the template")
        seen.add(token)
        pattern += b"(?P<%s>.*?)" % _INPUT_FIELDS[token].encode()
    if not seen & {"k", "v"}:
        raise ValueError("the template reads neither a key (%k) nor a value (%v)")
    regex = re.compile(pattern, re.DOTALL)

    def parse(data: bytes) -> InputRecord | None:
        match = regex.fullmatch(data)
        if match is None:
            raise InputError(f"does not match the template {template!r}")
        fields = match.groupdict()
        headers: Headers = []
        if fields.get("headers"):
            for item in fields["headers"].split(b","):
                try:
                    headers.append(parse_header(item.decode("utf-8", "replace")))
                except ValueError as error:
                    raise InputError(f"header {item!r}: {error}") from None
        headers += extra
        numbers: dict[str, int | None] = {}
        for name in ("partition", "timestamp"):
            text = fields.get(name)
            if text is None:
                numbers[name] = None
                continue
            try:
                numbers[name] = int(text)
            except ValueError:
                raise InputError(f"{name} {text!r} is not a number") from None
        value = fields.get("value") if "v" in seen else None
        return InputRecord(fields.get("key"), value, headers, numbers["partition"], numbers["timestamp"])

    return delimiter, parse

def whole_file_parser(extra: Headers) -> Parser:
    """Each input item is a whole file: one record, the file's bytes as its value (no key)."""
    headers = list(extra)
    return lambda data: InputRecord(None, data, list(headers))


def read_files(paths: Iterable[Path]) -> Iterator[tuple[int, bytes]]:
    """(file number, contents) of each file, read one at a time."""
    for number, path in enumerate(paths, 1):
        yield number, path.read_bytes()

def json_array_parser(keep_partition: bool, keep_timestamp: bool, extra: Headers) -> Parser:
    """Elements of one JSON array (what `kctl consume --format json` writes), each an envelope; the
    input is the array's elements, re-encoded one per item by `json_array_items`."""
    envelope = envelope_parser(keep_partition, keep_timestamp, extra)
    return lambda item: envelope(json.loads(item))


def json_array_items(data: bytes) -> list[tuple[int, bytes]]:
    """(element number, the element as JSON) of the JSON array ``data``; InputError when ``data``
    is not one JSON array."""
    try:
        document = json.loads(data) if data.strip() else []
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError(
            f"--format json reads one JSON array (use jsonl for one object per line): {error}"
        ) from None
    if not isinstance(document, list):
        raise InputError(f"--format json reads one JSON array, got {type(document).__name__}")
    return [(number, json.dumps(item).encode()) for number, item in enumerate(document, 1)]


class ProduceSession:
    """Sends parsed records to one topic and reports each outcome in input order: `on_delivered(line,
    metadata)` for an acknowledged record, `on_error(line, message)` for a line that is not a record
    or a record not delivered. `delivered` and `failed` count them."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        *,
        on_error: Callable[[int, str], None],
        on_delivered: Callable[[int, RecordMetadata], None] | None = None,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.on_error = on_error
        self.on_delivered = on_delivered
        self.unreported: collections.deque[tuple[int, RecordFuture]] = collections.deque()
        self.delivered = 0
        self.failed = 0

    def error(self, line: int, message: str) -> None:
        self.failed += 1
        self.on_error(line, message)

    def _finish(self, line: int, future: RecordFuture) -> None:
        error = future.exception()
        if error is not None:
            self.error(line, f"not delivered: {error}")
            return
        self.delivered += 1
        if self.on_delivered is not None:
            self.on_delivered(line, future.result())

    def finish(self) -> None:
        """Wait for every record sent and report the outcomes not reported yet."""
        self.producer.flush()
        while self.unreported:
            self._finish(*self.unreported.popleft())

    def run(self, lines: Iterable[tuple[int, bytes]], parse: Parser, partition: int | None = None) -> None:
        """Parse and send every (line number, line); report outcomes as they come (in input order).
        `partition`, when given, wins over the records' own. Raises StoppedReading when the
        producer refuses a record (the outcomes of those sent are reported by `finish`)."""
        send, topic = self.producer.send, self.topic
        unreported = self.unreported
        remember, oldest, finish = unreported.append, unreported.popleft, self._finish
        for number, line in lines:
            try:
                record = parse(line)
            except InputError as error:
                self.error(number, str(error))
                continue
            if record is None:
                continue
            key, value, headers, record_partition, timestamp = record
            try:
                future = send(
                    topic,
                    value,
                    key,
                    headers or None,
                    partition if partition is not None else record_partition,
                    timestamp,
                )
            except (TypeError, ValueError) as error:
                self.error(number, str(error))
                continue
            except KafkaError as error:  # the buffer stayed full (broker gone): stop reading
                self.error(number, f"not sent: {error}")
                raise StoppedReading(number) from None
            remember((number, future))
            while unreported and unreported[0][1].done():
                finish(*oldest())
            if len(unreported) > MAX_UNREPORTED:
                finish(*oldest())  # waits for the oldest

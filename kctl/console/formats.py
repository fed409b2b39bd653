"""How the console consumer and producer represent records as text and bytes.

- The JSON envelope (`record_envelope`): {"topic", "partition", "offset", "timestamp",
  "timestamp_type", "key", "value", "headers"}; keys, values and header values are a string when
  they are valid UTF-8, else {"base64": "<standard base64>"} (`bytes_to_json`, reversed losslessly
  by `bytes_from_json`); None is null; headers are [key, value] pairs (keys may repeat).
- Record templates (`compile_template`, `RecordTemplate`): `%t` topic, `%p` partition, `%o` offset,
  `%T` timestamp, `%k` key, `%v` value, `%h` headers, `%%`; escapes `\\t \\n \\r \\0 \\\\`.
- `JsonLinesEncoder`: the envelope as one JSON line in bytes, byte for byte what `json.dumps` of
  `record_envelope` gives (compact separators, ensure_ascii off), without building the dict.
- `readable_timestamp`: epoch milliseconds as RFC 3339 UTC.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: `kctl --help` and the log tools start without the client
    from kctl.client.consumer import ConsumerRecord


def bytes_to_json(data: bytes | bytearray | memoryview | None) -> str | dict[str, str] | None:
    """`data` as JSON: the text when it is valid UTF-8, else {"base64": ...}; None stays None."""
    if data is None:
        return None
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def bytes_from_json(value: str | Mapping[str, str]) -> bytes:
    """The bytes that `bytes_to_json` rendered as `value` (a UTF-8 string or ``{"base64": ...}``).
    Raises ValueError (binascii.Error for bad base64) or TypeError for anything else."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, Mapping) and set(value) == {"base64"}:
        return base64.b64decode(value["base64"], validate=True)
    raise ValueError(f'expected a string or {{"base64": ...}}, got {value!r}')


def record_envelope(record: ConsumerRecord) -> dict[str, Any]:
    """The JSON object of a record (what `kctl consume --format jsonl` writes and `kctl produce
    --format jsonl` reads)."""
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": record.timestamp_type.label,
        "key": bytes_to_json(record.key),
        "value": bytes_to_json(record.value),
        "headers": [[k, bytes_to_json(v)] for k, v in record.headers],
    }


# -- JSON lines, fast ------------------------------------------------------------------------------
_NEEDS_ESCAPE = re.compile(rb'[\x00-\x1f"\\]')
"""The bytes `json.dumps(..., ensure_ascii=False)` escapes in a string: control characters, the
quote and the backslash (every other character, DEL and U+2028 included, is written as it is)."""


def _json_bytes(data: bytes | None) -> bytes:
    """`json.dumps(bytes_to_json(data), ensure_ascii=False)` as UTF-8 bytes."""
    if data is None:
        return b"null"
    if type(data) is not bytes:
        data = bytes(data)
    if data.isascii() or _valid_utf8(data):
        if _NEEDS_ESCAPE.search(data) is None:
            return b'"' + data + b'"'
        return encode_basestring(data.decode("utf-8")).encode("utf-8")
    return b'{"base64":"' + base64.b64encode(data) + b'"}'


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class JsonLinesEncoder:
    """Records as JSON lines: `encode(record)` is ``json.dumps(record_envelope(record),
    ensure_ascii=False, separators=(",", ":")) + "\n"`` in UTF-8, byte for byte, built without the
    dict or the json module's per-record work. The text before the offset is kept per topic and
    partition, and a key, value or header value that is UTF-8 without anything to escape is copied
    as it is (`kctl consume --format jsonl` writes millions of records)."""

    __slots__ = ("_heads", "_types")

    def __init__(self) -> None:
        self._heads: dict[tuple[str, int], bytes] = {}
        self._types: dict[Any, bytes] = {}

    def encode(self, record: ConsumerRecord) -> bytes:
        topic, partition, offset, timestamp, timestamp_type, key, value, headers = record
        head = self._heads.get((topic, partition))
        if head is None:
            head = b'{"topic":%s,"partition":%d,"offset":' % (
                encode_basestring(topic).encode("utf-8"),
                partition,
            )
            self._heads[(topic, partition)] = head
        kind = self._types.get(timestamp_type)
        if kind is None:
            kind = b',"timestamp_type":%s,"key":' % encode_basestring(timestamp_type.label).encode("utf-8")
            self._types[timestamp_type] = kind
        if headers:
            header_text = b"[" + b",".join(
                b"[" + encode_basestring(k).encode("utf-8") + b"," + _json_bytes(v) + b"]" for k, v in headers
            ) + b"]}\n"
        else:
            header_text = b"[]}\n"
        return b"%s%d,\"timestamp\":%d%s%s,\"value\":%s,\"headers\":%s" % (
            head,
            offset,
            timestamp,
            kind,
            _json_bytes(key),
            _json_bytes(value),
            header_text,
        )


def readable_timestamp(ms: int) -> str:
    """Epoch milliseconds as RFC 3339 UTC with milliseconds (`2026-11-22T10:00:00.123Z`); `-` if none."""
    if ms < 0:
        return "-"
    try:
        moment = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


# -- templates -------------------------------------------------------------------------------------
_TEMPLATE_ESCAPES = {"t": b"\t", "n": b"\n", "r": b"\r", "0": b"\0", "\\": b"\\"}


def _headers_bytes(record: ConsumerRecord) -> bytes:
    return b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in record.headers)


_FIELD_BYTES: dict[str, Callable[[ConsumerRecord], bytes]] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: b"%d" % r.partition,
    "o": lambda r: b"%d" % r.offset,
    "T": lambda r: b"%d" % r.timestamp,
    "k": lambda r: r.key if r.key is not None else b"",
    "v": lambda r: r.value if r.value is not None else b"",
    "h": _headers_bytes,
}


def template_tokens(template: str) -> list[bytes | str]:
    """A record template as literal bytes and field letters (``"k"``, ``"v"``, ...). `%t` topic, `%p`
    partition, `%o` offset, `%T` timestamp (epoch ms), `%k` key, `%v` value, `%h` headers
    (`k=v,k2=v2`), `%%` a percent sign; escapes `\\t`, `\\n`, `\\r`, `\\0`, `\\\\`. Raises ValueError for
    an unknown field or escape."""
    tokens: list[bytes | str] = []
    literal = bytearray()
    i = 0
    while i < len(template):
        ch = template[i]
        if ch in "%\\" and i + 1 >= len(template):
            raise ValueError(f"template ends with a lone {ch!r}")
        if ch == "%":
            name = template[i + 1]
            if name == "%":
                literal += b"%"
            elif name in _FIELD_BYTES:
                if literal:
                    tokens.append(bytes(literal))
                    literal.clear()
                tokens.append(name)
            else:
                raise ValueError(f"unknown field %{name} (known: %t %p %o %T %k %v %h %%)")
            i += 2
        elif ch == "\\":
            name = template[i + 1]
            if name not in _TEMPLATE_ESCAPES:
                raise ValueError(f"unknown escape \\{name} (known: \\t \\n \\r \\0 \\\\)")
            literal += _TEMPLATE_ESCAPES[name]
            i += 2
        else:
            literal += ch.encode()
            i += 1
    if literal:
        tokens.append(bytes(literal))
    return tokens


def compile_template(template: str) -> list[bytes | Callable[[ConsumerRecord], bytes]]:
    """Parse a record template (see `template_tokens`; a null key or value renders as empty) into
    literal bytes and field getters. Raises ValueError for an unknown field or escape."""
    return [t if isinstance(t, bytes) else _FIELD_BYTES[t] for t in template_tokens(template)]


class RecordTemplate:
    """A compiled record template: `render(record)` is the record's bytes in it."""

    __slots__ = ("parts",)

    def __init__(self, template: str) -> None:
        self.parts = compile_template(template)

    def render(self, record: ConsumerRecord) -> bytes:
        return b"".join(p if type(p) is bytes else p(record) for p in self.parts)  # type: ignore[operator]

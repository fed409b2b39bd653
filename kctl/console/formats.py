"""How the console consumer and producer represent records as text and bytes.

- The JSON envelope (`record_envelope`): {"topic", "partition", "offset", "timestamp",
  "timestamp_type", "key", "value", "headers"}; keys, values and header values are a string when
  they are valid UTF-8, else {"base64": "<standard base64>"} (`bytes_to_json`, reversed losslessly
  by `bytes_from_json`); None is null; headers are [key, value] pairs (keys may repeat).
- Record templates (`compile_template`, `RecordTemplate`): `%t` topic, `%p` partition, `%o` offset,
  `%T` timestamp, `%k` key, `%v` value, `%h` headers, `%%`; escapes `\\t \\n \\r \\0 \\\\`.
- `readable_timestamp`: epoch milliseconds as RFC 3339 UTC.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Mapping
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


def compile_template(template: str) -> list[bytes | Callable[[ConsumerRecord], bytes]]:
    """Parse a record template into literal bytes and field getters. `%t` topic, `%p` partition,
    `%o` offset, `%T` timestamp (epoch ms), `%k` key, `%v` value (raw bytes; null as empty), `%h`
    headers (`k=v,k2=v2`), `%%` a percent sign; escapes `\\t`, `\\n`, `\\r`, `\\0`, `\\\\`.
    Raises ValueError for an unknown field or escape."""
    parts: list[bytes | Callable[[ConsumerRecord], bytes]] = []
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
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(_FIELD_BYTES[name])
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
        parts.append(bytes(literal))
    return parts


class RecordTemplate:
    """A compiled record template: `render(record)` is the record's bytes in it."""

    __slots__ = ("parts",)

    def __init__(self, template: str) -> None:
        self.parts = compile_template(template)

    def render(self, record: ConsumerRecord) -> bytes:
        return b"".join(p if type(p) is bytes else p(record) for p in self.parts)  # type: ignore[operator]

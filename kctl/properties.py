"""Java `.properties` files (client configs, server.properties): a parser and a writer.

Follows `java.util.Properties.load`/`store`:

- Lines end with ``\\n``, ``\\r`` or ``\\r\\n``. A line whose first non-blank character is ``#`` or
  ``!`` is a comment; blank lines are skipped. Blanks are space, tab and form feed.
- A line ending in an odd number of backslashes continues on the next line; the leading blanks of
  the continuation are dropped. Comment lines do not continue.
- The key runs to the first unescaped ``=``, ``:`` or blank. Then blanks, at most one ``=`` or
  ``:``, and blanks again are skipped; the rest of the line is the value (trailing blanks kept).
  ``key=value``, ``key: value``, ``key value`` and a bare ``key`` (empty value) are all valid.
- Escapes in keys and values: ``\\t \\n \\r \\f``, ``\\uXXXX`` (surrogate pairs are joined), and a
  backslash before any other character stands for that character (``\\=``, ``\\:``, ``\\ ``,
  ``\\\\``). A malformed ``\\uXXXX`` is an error.
- A repeated key keeps its last value.

Files are read as UTF-8, falling back to ISO-8859-1 (Java's `load(InputStream)` charset) when
they are not valid UTF-8. The writer escapes non-ASCII characters as ``\\uXXXX`` by default, so its
files read the same under either charset. This module is a bottom-layer utility: it imports
nothing from kctl.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import TextIO

__all__ = ["PropertiesError", "dump", "dumps", "iter_entries", "load", "loads"]

_BLANKS = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A malformed properties text; `lineno` is the 1-based line where the entry starts."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


def _ends_with_odd_backslashes(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[str, int]]:
    """Yield (logical line without leading blanks, line number of its first natural line)."""
    natural = _LINE_BREAK.split(text)
    # Java quirk: a lone backslash whose one-character line break ends the input is an empty entry.
    lone_backslash_at_end = natural[-1] == "" and not text.endswith("\r\n")
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_BLANKS)
        i += 1
        if line == "\\" and (i == len(natural) or (i == len(natural) - 1 and lone_backslash_at_end)):
            yield "", start + 1
            return
        # Blank, comment, or a lone continuation backslash: the logical line has no content yet,
        # so (as in Java) the next natural line starts it afresh, and may itself be a comment.
        if not line or line[0] in "#!" or line == "\\":
            continue
        parts = []
        while _ends_with_odd_backslashes(line):
            parts.append(line[:-1])
            if i >= len(natural):  # continuation at end of input: the backslash is dropped
                line = ""
                break
            line = natural[i].lstrip(_BLANKS)
            i += 1
        parts.append(line)
        yield "".join(parts), start + 1


def _unescape(raw: str, lineno: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        i += 1
        if i >= len(raw):  # a lone trailing backslash stands for nothing
            break
        ch = raw[i]
        if ch == "u":
            digits = raw[i + 1 : i + 5]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(f"malformed \\uXXXX escape: \\u{digits}", lineno)
            out.append(chr(int(digits, 16)))
            i += 5
        else:
            out.append(_SIMPLE_ESCAPES.get(ch, ch))
            i += 1
    text = "".join(out)
    if any("\ud800" <= c <= "\udfff" for c in text):  # join surrogate pairs from \\uD83D\\uDE00
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _split_entry(line: str) -> tuple[str, str]:
    """Split a logical line into raw (still escaped) key and value, as Properties.load does."""
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    backslash = False
    for pos, ch in enumerate(line):
        if ch == "\\":
            backslash = not backslash
            continue
        if not backslash and ch in "=:":
            key_end, value_start, has_separator = pos, pos + 1, True
            break
        if not backslash and ch in _BLANKS:
            key_end, value_start = pos, pos + 1
            break
        backslash = False
    while value_start < len(line):
        ch = line[value_start]
        if ch not in _BLANKS:
            if has_separator or ch not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def iter_entries(text: str) -> Iterator[tuple[str, str, int]]:
    """Yield (key, value, line number) for every entry of a properties text, in file order."""
    for line, lineno in _logical_lines(text):
        raw_key, raw_value = _split_entry(line)
        yield _unescape(raw_key, lineno), _unescape(raw_value, lineno), lineno


def loads(text: str) -> dict[str, str]:
    """Parse a properties text; a repeated key keeps its last value (at its first position)."""
    return {key: value for key, value, _ in iter_entries(text)}


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


def load(source: str | os.PathLike[str] | TextIO) -> dict[str, str]:
    """Parse a properties file given by path, or an open text stream."""
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            return loads(_decode(f.read()))
    return loads(source.read())


def _escape(text: str, *, is_key: bool, ensure_ascii: bool) -> str:
    out: list[str] = []
    for pos, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(ch)])
        elif ch == " " and (is_key or pos == 0):
            out.append("\\ ")
        elif is_key and ch in "=:#!":
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F or (ensure_ascii and code > 0x7E):
            for unit in ch.encode("utf-16-be", "surrogatepass").hex(" ", 2).split():
                out.append(f"\\u{unit.upper()}")
        else:
            out.append(ch)
    return "".join(out)


def dumps(props: Mapping[str, str], *, comments: str | None = None, ensure_ascii: bool = True) -> str:
    """Properties text for `props` (in mapping order), one ``key=value`` line each.

    `comments` become leading ``#`` lines. No timestamp is written, so equal input gives equal
    output. Values' ``=``, ``:``, ``#`` and ``!`` are left unescaped (they are unambiguous there).
    """
    lines = [f"# {line}".rstrip() for line in (comments or "").splitlines()]
    for key, value in props.items():
        key_text = _escape(key, is_key=True, ensure_ascii=ensure_ascii)
        value_text = _escape(value, is_key=False, ensure_ascii=ensure_ascii)
        lines.append(f"{key_text}={value_text}")
    return "".join(line + "\n" for line in lines)


def dump(
    props: Mapping[str, str],
    target: str | os.PathLike[str] | TextIO,
    *,
    comments: str | None = None,
    ensure_ascii: bool = True,
) -> None:
    """Write `props` as a properties file to a path (UTF-8) or an open text stream."""
    text = dumps(props, comments=comments, ensure_ascii=ensure_ascii)
    if isinstance(target, str | os.PathLike):
        with open(target, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    else:
        target.write(text)

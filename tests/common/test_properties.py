"""kctl.properties: the Java .properties parser and writer, checked against java.util.Properties."""

from __future__ import annotations

import io
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kctl.properties import PropertiesError, dump, dumps, iter_entries, load, loads


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key=value", {"key": "value"}),
        ("key:value", {"key": "value"}),
        ("key value", {"key": "value"}),
        ("key = value", {"key": "value"}),
        ("key\t:\tvalue", {"key": "value"}),
        ("   key=value", {"key": "value"}),
        ("key", {"key": ""}),
        ("key=", {"key": ""}),
        ("key = = value", {"key": "= value"}),
        ("key==value", {"key": "=value"}),
        ("key  value  ", {"key": "value  "}),
        ("=value", {"": "value"}),
        ("a:b=c", {"a": "b=c"}),
        ("listeners=PLAINTEXT://127.0.0.1:9092", {"listeners": "PLAINTEXT://127.0.0.1:9092"}),
        ("k=v1\nk=v2", {"k": "v2"}),
        ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
    ],
)
def test_separators_and_whitespace(text: str, expected: dict[str, str]) -> None:
    assert loads(text) == expected


def test_comments_and_blank_lines() -> None:
    text = "# a comment\n! another\n   # indented comment\n\n \t \nkey=value # not a comment\n"
    assert loads(text) == {"key": "value # not a comment"}


def test_line_continuations() -> None:
    text = "fruits = apple, banana, \\\n         pear, \\\n   cherry\nnext=1\n"
    assert loads(text) == {"fruits": "apple, banana, pear, cherry", "next": "1"}


def test_even_backslashes_do_not_continue() -> None:
    assert loads("path=c:\\\\\nnext=1") == {"path": "c:\\", "next": "1"}


def test_comment_lines_do_not_continue_but_continued_lines_may_start_with_hash() -> None:
    assert loads("# comment \\\nkey=value") == {"key": "value"}
    assert loads("key=a\\\n#b") == {"key": "a#b"}


def test_continuation_at_end_of_input_and_blank_continuation() -> None:
    assert loads("key=value\\") == {"key": "value"}
    assert loads("key=a\\\n   \nb=2") == {"key": "a", "b": "2"}


def test_escapes() -> None:
    text = "tab\\tkey=a\\tb\\nc\\rd\\fe\nesc\\=aped\\:key\\ x=\\\\ok\nu=\\u0041\\u00e9\\u20AC\nother=\\q\\b"
    assert loads(text) == {
        "tab\tkey": "a\tb\nc\rd\fe",
        "esc=aped:key x": "\\ok",
        "u": "Aé€",
        "other": "qb",
    }


def test_surrogate_pairs_are_joined() -> None:
    assert loads("smile=\\ud83d\\ude00") == {"smile": "\U0001f600"}


def test_malformed_unicode_escape_is_an_error_with_its_line() -> None:
    with pytest.raises(PropertiesError) as info:
        loads("a=1\n\nbad=\\u12G4\n")
    assert info.value.lineno == 3
    assert "line 3" in str(info.value)


def test_iter_entries_reports_the_line_where_an_entry_starts() -> None:
    text = "# c\na=1\nb=x\\\n  y\nc=3\n"
    assert list(iter_entries(text)) == [("a", "1", 2), ("b", "xy", 3), ("c", "3", 5)]


def test_load_from_path_utf8_and_latin1(tmp_path: Path) -> None:
    utf8 = tmp_path / "utf8.properties"
    utf8.write_bytes("name=café\n".encode())
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name=café\n".encode("iso-8859-1"))
    assert load(utf8) == {"name": "café"}
    assert load(str(latin1)) == {"name": "café"}
    assert load(io.StringIO("a=b")) == {"a": "b"}


def test_dumps_escapes_what_the_parser_needs() -> None:
    props = {
        "plain": "value",
        "key with=sep:#!": "v",
        " lead": "  leading spaces",
        "ctl": "a\tb\nc\\d",
        "uni": "é€\U0001f600",
        "listeners": "PLAINTEXT://:9092",
        "empty": "",
    }
    text = dumps(props, comments="generated\nby kctl")
    assert text.startswith("# generated\n# by kctl\n")
    assert "plain=value\n" in text
    assert "key\\ with\\=sep\\:\\#\\!=v\n" in text
    assert "\\ lead=\\  leading spaces\n" in text
    assert "ctl=a\\tb\\nc\\\\d\n" in text
    assert "uni=\\u00E9\\u20AC\\uD83D\\uDE00\n" in text
    assert "listeners=PLAINTEXT://:9092\n" in text
    assert text.isascii()
    assert loads(text) == props


def test_dumps_without_ascii_escapes_keeps_unicode() -> None:
    assert dumps({"k": "é"}, ensure_ascii=False) == "k=é\n"


def test_dump_to_path_and_stream(tmp_path: Path) -> None:
    path = tmp_path / "out.properties"
    dump({"a": "1"}, path)
    assert path.read_text() == "a=1\n"
    stream = io.StringIO()
    dump({"a": "1"}, stream, comments="c")
    assert stream.getvalue() == "# c\na=1\n"


def _random_text(rng: random.Random) -> str:
    alphabet = " \t\f\n\r=:#!\\\\abcXYZ019é€\u0000\u007f\U0001f600"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


def test_round_trip_of_arbitrary_strings() -> None:
    rng = random.Random(1234)
    for _ in range(500):
        props = {_random_text(rng): _random_text(rng) for _ in range(rng.randint(0, 5))}
        assert loads(dumps(props)) == props
        assert loads(dumps(props, ensure_ascii=False)) == props


# -- java.util.Properties as the oracle ------------------------------------------------------------
_ORACLE = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class PropsOracle {
    public static void main(String[] args) throws Exception {
        String all = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        for (String doc : all.split("\ue000", -1)) {
            Properties p = new Properties();
            try {
                p.load(new StringReader(doc));
                for (String k : p.stringPropertyNames()) {
                    out.append(hex(k)).append(' ').append(hex(p.getProperty(k))).append('\n');
                }
            } catch (IllegalArgumentException e) {
                out.append("error\n");
            }
            out.append("--\n");
        }
        System.out.print(out);
    }

    static String hex(String s) {
        StringBuilder b = new StringBuilder("x");
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
}
"""

_CASES = [
    "key=value\nkey2 : value2\nkey3 value3\n  key4\t=\tvalue4  \n",
    "# comment\n! comment\nk=v\\\n   continued\\\n\tagain\n",
    "a\\ b\\=c\\:d=e\\tf\\ng\\u0041\\\\\n",
    "k = = v\nk2==v2\nk3 :: v3\nk4\t\f=x\n",
    "# comment \\\nnot=continued\nx=a\\\n#b\n",
    "trailing=slash\\",
    "a=1\r\nb=2\rc=3\n\n   \n=empty key\nonly_key\n",
    "bad=\\u12G4\n",
    "s=\\ud83d\\ude00\\q\\b\n",
    "even=a\\\\\nnext=b\n",
    "k=a\\\n   \nb=2\n",
    # a lone backslash line: an empty entry only when its one-character line break ends the input
    "\\",
    "\\\n",
    "\\\r",
    "\\\r\n",
    "\\\n\n",
    "  \\\n \\\n",
    "\\\nk=v",
    "\\\n#c",
    "\\\n  ",
]


def _decode_hex(text: str) -> str:
    units = bytes.fromhex(text[1:])
    return units.decode("utf-16-be", "surrogatepass")


def _java_oracle(tmp_path: Path, docs: list[str]) -> list[dict[str, str] | None]:
    source = tmp_path / "PropsOracle.java"
    source.write_text(_ORACLE)
    proc = subprocess.run(
        ["java", str(source)], input="\ue000".join(docs).encode(), capture_output=True, timeout=120
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot run a Java source file here: {proc.stderr.decode(errors='replace')[:200]}")
    results: list[dict[str, str] | None] = []
    for block in proc.stdout.decode().split("--\n")[:-1]:
        lines = block.splitlines()
        if lines == ["error"]:
            results.append(None)
            continue
        results.append(dict((_decode_hex(k), _decode_hex(v)) for k, v in (line.split(" ") for line in lines)))
    return results


def _ours(doc: str) -> dict[str, str] | None:
    try:
        return loads(doc)
    except PropertiesError:
        return None


@pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
def test_parser_agrees_with_java_util_properties(tmp_path: Path) -> None:
    rng = random.Random(99)
    written = [dumps({_random_text(rng): _random_text(rng) for _ in range(4)}) for _ in range(40)]
    breaks = ["\n", "\n", "\r", "\r\n"]
    lines = ([_random_text(rng) + rng.choice(breaks) for _ in range(rng.randint(1, 8))] for _ in range(2000))
    generated = ["".join(doc)[: rng.randint(0, 80)] for doc in lines]
    docs = _CASES + written + generated
    expected = _java_oracle(tmp_path, docs)
    assert len(expected) == len(docs)
    for doc, java in zip(docs, expected, strict=True):
        assert _ours(doc) == java, f"disagreement with Java on {doc!r}"

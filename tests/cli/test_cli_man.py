"""`kctl man` (issue 15): the man pages, with their EXAMPLES, can be shown, located and installed, and
a built wheel carries them to <prefix>/share/man/man1 where `man` finds them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
needs_man = pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")


def kctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_path_names_the_pages_directory_and_a_page() -> None:
    directory = kctl("man", "--path")
    assert directory.returncode == 0, directory.stderr
    pages = Path(directory.stdout.strip())
    assert (pages / "kctl.1").is_file()
    page = kctl("man", "topic", "create", "--path")
    assert Path(page.stdout.strip()) == pages / "kctl-topic-create.1"
    assert ".SH EXAMPLES" in Path(page.stdout.strip()).read_text()


def test_an_unknown_page_exits_3() -> None:
    done = kctl("man", "topic", "frobnicate")
    assert done.returncode == 3
    assert "no man page for 'kctl topic frobnicate'" in done.stderr
    assert done.stdout == ""


@needs_man
def test_shows_a_page_with_its_examples() -> None:
    done = kctl("man", "group", "rewind", env={**os.environ, "MANWIDTH": "100", "MANPAGER": "cat"})
    assert done.returncode == 0, done.stderr
    assert "EXAMPLES" in done.stdout
    assert "kctl group rewind billing --to-earliest --execute" in done.stdout


@needs_man
def test_install_copies_every_page_where_man_finds_them(tmp_path: Path) -> None:
    target = tmp_path / "share" / "man" / "man1"
    done = kctl("man", "--install", "--dir", str(target))
    assert done.returncode == 0, done.stderr
    expected = sorted(p.name for p in (REPO / "man").glob("kctl*.1"))
    assert sorted(p.name for p in target.glob("*.1")) == expected
    assert f"into {target}" in done.stderr
    env = {**os.environ, "MANPATH": str(tmp_path / "share" / "man"), "MANWIDTH": "100", "MANPAGER": "cat"}
    shown = subprocess.run(["man", "kctl-log-verify"], capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "kctl log verify /data" in shown.stdout


def test_a_built_wheel_installs_the_pages_under_share_man(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = tmp_path.glob("kctl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    pages = sorted(Path(n).name for n in names if "/data/share/man/man1/" in n)
    assert pages == sorted(p.name for p in (REPO / "man").glob("kctl*.1"))

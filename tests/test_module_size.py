"""Modules stay small enough to read: none in kctl/ passes 800 lines (split it before it does)."""

from __future__ import annotations

from pathlib import Path

import kctl

LIMIT = 800


def test_no_kctl_module_passes_the_line_limit() -> None:
    root = Path(kctl.__file__).parent
    sizes = {path.relative_to(root.parent): len(path.read_text().splitlines()) for path in root.rglob("*.py")}
    assert len(sizes) > 100, "kctl's modules were found"
    assert {str(path): n for path, n in sizes.items() if n > LIMIT} == {}

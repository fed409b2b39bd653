"""Running `kctl` as a user does, for the CLI tests: a fresh `python -m kctl` process with text
output, a wide terminal (tables are not wrapped) and no KCTL_BOOTSTRAP_SERVER from the caller's
environment (each test names its broker)."""

from __future__ import annotations

import os
import subprocess
import sys


def kctl(
    *args: str,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    columns: int = 200,
) -> subprocess.CompletedProcess[str]:
    """`kctl ARGS` in a subprocess: exit status, stdout and stderr as text."""
    environment = {k: v for k, v in os.environ.items() if k != "KCTL_BOOTSTRAP_SERVER"}
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
        env={**environment, "COLUMNS": str(columns), **(env or {})},
    )

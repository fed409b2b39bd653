"""The broker's open-file limit is raised to the hard limit at start (kctl.common.fd_limit)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

resource = pytest.importorskip("resource")  # POSIX only

_CHILD = """
import json, resource
from kctl.common.fd_limit import raise_open_files_limit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
returned = raise_open_files_limit()
print(json.dumps([returned, resource.getrlimit(resource.RLIMIT_NOFILE)]))
"""


def test_the_soft_limit_is_raised_to_the_hard_limit() -> None:
    """In a child process (the limit is per process): soft limit lowered to 256, then raised."""
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True).stdout
    returned, (soft, hard) = json.loads(out)
    _, hard_here = resource.getrlimit(resource.RLIMIT_NOFILE)
    expected = hard_here if hard_here != resource.RLIM_INFINITY else max(256, 1 << 20)
    assert soft == expected and hard == hard_here
    assert returned == [soft, hard]

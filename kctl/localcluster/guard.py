"""Which external processes the running test may start: the pytest plugin narrows it to what the
test's markers declare (``e2e`` for brokers, ``zk`` for ZooKeeper), so a test that starts one without
its marker fails loudly instead of slipping into the fast unit-test run (``-m "not e2e and not zk"``).

Outside pytest (a user's script, a benchmark) nothing is checked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator


class UnmarkedProcessError(RuntimeError):
    """A test started a broker or ZooKeeper without the marker that says it does."""


_allowed: frozenset[str] | None = None  # None: no test is running under the plugin, anything goes
_test = ""


def check(marker: str, what: str) -> None:
    """Raise `UnmarkedProcessError` when the running test may not start ``what`` (needs ``marker``)."""
    if _allowed is not None and marker not in _allowed:
        raise UnmarkedProcessError(
            f"{_test} starts {what} but is not marked {marker!r}: mark it (pytest.mark.{marker}), "
            "or use the kctl.testing fixtures, which mark the tests using them"
        )


@contextlib.contextmanager
def running_test(test: str, markers: Iterable[str]) -> Iterator[None]:
    """While a test runs (setup, call, teardown), allow only the processes its markers declare."""
    global _allowed, _test
    previous = _allowed, _test
    _allowed, _test = frozenset(markers), test
    try:
        yield
    finally:
        _allowed, _test = previous

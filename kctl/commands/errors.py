"""Exit codes of the `kctl` command and the error type commands raise to end with one.

Commands signal their outcome in exactly two ways: return normally (exit 0) or raise. Raise
`KctlError(message, exit_code=...)` for an expected failure the operator should read about
(`kctl: error: <message>` on stderr), or `typer.Exit(ExitCode.FAILURE)` to end with a code after
having printed the finding yourself (e.g. a corruption report on stdout).
"""

from __future__ import annotations

import errno
import socket
from enum import IntEnum


class ExitCode(IntEnum):
    """The documented exit statuses of every `kctl` command (also listed in the man pages)."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    NOT_FOUND = 3
    INTERRUPTED = 130
    TERMINATED = 143

    @property
    def description(self) -> str:
        """One sentence for the EXIT STATUS section of the man pages."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS: dict[ExitCode, str] = {
    ExitCode.OK: "Success.",
    ExitCode.FAILURE: (
        "A finding or a failure: for example corruption was found, records were not delivered, "
        "or an unexpected error occurred."
    ),
    ExitCode.USAGE: (
        "Usage error: unknown command or option, bad option value, or a malformed or unknown "
        "configuration key."
    ),
    ExitCode.NOT_FOUND: (
        "A requested thing does not exist or cannot be reached: a missing file, directory, topic or broker."
    ),
    ExitCode.INTERRUPTED: "Interrupted (Ctrl-C).",
    ExitCode.TERMINATED: "Stopped by SIGTERM, as cleanly as by Ctrl-C (offsets committed, the group left).",
}


class KctlError(Exception):
    """An expected error with a message for the operator and the exit code to end with."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.FAILURE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = ExitCode(exit_code)

    def __str__(self) -> str:
        return self.message


# OS errors that mean "the thing named on the command line is not there / not reachable".
_NOT_FOUND_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ECONNREFUSED, errno.EHOSTUNREACH})


def classify_os_error(exc: OSError) -> tuple[ExitCode, str]:
    """The exit code and a one-line message for an OSError that escaped a command.

    Missing files or directories, refused connections and unresolvable host names exit with
    NOT_FOUND (3); any other OS error is a FAILURE (1).
    """
    if isinstance(exc, socket.gaierror):
        return ExitCode.NOT_FOUND, f"cannot resolve host name: {exc.strerror or exc}"
    code = ExitCode.NOT_FOUND if exc.errno in _NOT_FOUND_ERRNOS else ExitCode.FAILURE
    if exc.strerror and exc.filename is not None:
        return code, f"{exc.strerror}: {exc.filename}"
    return code, exc.strerror or str(exc) or type(exc).__name__

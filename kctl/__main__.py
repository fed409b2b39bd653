"""The `kctl` entry point: run the command tree and map every outcome to a documented exit code.

0 success, 1 a finding or failure, 2 usage error, 3 not found / unreachable, 130 interrupted,
143 stopped by SIGTERM (see `kctl.commands.errors.ExitCode`). SIGTERM is delivered to a command as
Ctrl-C is, so every command stops as cleanly on either (a group consumer commits and leaves).
Errors go to stderr as ``kctl: error: <message>``; a traceback is printed only when the environment
variable KCTL_DEBUG is set to 1. A closed stdout (`kctl ... | head -1`) ends the command quietly
with 0.

Start-up is kept short (tests/cli/test_cli_startup.py): `kctl --version` is answered before typer and
the command tree are imported, and the command modules import the client, the broker and the other
heavy libraries inside the commands that use them.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kctl.commands.errors import ExitCode, KctlError, classify_os_error

if TYPE_CHECKING:
    import typer

DEBUG_ENV = "KCTL_DEBUG"
"""Set to 1 to print full tracebacks of errors."""


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _error(message: str) -> None:
    try:
        sys.stderr.write(f"kctl: error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail on a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be."""


_terminated = False


def _on_sigterm(signum: int, frame: object) -> None:
    global _terminated
    _terminated = True
    raise Terminated()


def _interrupted() -> int:
    if _terminated:
        return ExitCode.TERMINATED
    try:
        if sys.stderr.isatty():
            sys.stderr.write("\n")
    except (OSError, ValueError):
        pass
    return ExitCode.INTERRUPTED


def _usage_error(exc: typer.TyperException) -> None:
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and type(exc).__name__ == "NoArgsIsHelpError":
        return  # the help text has been printed already
    if ctx is not None:
        hint = f"Try '{ctx.command_path} {ctx.help_option_names[-1]}' for help."
        sys.stderr.write(f"{ctx.get_usage()}\n{hint}\n\n")
    # typer validates values with pydantic, whose messages start with "Value error, ".
    _error(exc.format_message().replace(": Value error, ", ": ", 1))


def _run(args: list[str]) -> int:
    import typer.main

    from kctl.commands.app import app_for

    command = typer.main.get_command(app_for(args))
    result = command.main(args=args, prog_name="kctl", standalone_mode=False)
    sys.stdout.flush()  # here, not at interpreter exit, so that a closed pipe is seen and handled
    # In non-standalone mode typer returns the code of a `typer.Exit`; commands return None.
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    return ExitCode.OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run `kctl` with `argv` (default: sys.argv[1:]) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:  # before typer and the command tree are imported: it answers at once
        from kctl import __version__

        try:
            sys.stdout.write(f"kctl {__version__}\n")
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
        return ExitCode.OK
    if argv is None:  # the process's own entry point (not a test calling main in-process)
        signal.signal(signal.SIGTERM, _on_sigterm)
    import typer

    try:
        code = _run(args)
        if code == ExitCode.INTERRUPTED:
            return _interrupted()
        return code
    except KctlError as exc:
        if _debug():
            traceback.print_exc()
        _error(exc.message)
        return exc.exit_code
    except typer.Abort as exc:
        if _caused_by(exc, KeyboardInterrupt):
            return _interrupted()
        _error("aborted")
        return ExitCode.FAILURE
    except typer.TyperException as exc:  # click usage errors (exit 2) and file errors (exit 1)
        if isinstance(exc.__context__, FileNotFoundError):
            _error(exc.format_message())
            return ExitCode.NOT_FOUND
        if exc.exit_code == ExitCode.USAGE:
            _usage_error(exc)
        else:
            _error(exc.format_message())
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except SystemExit as exc:
        if _caused_by(exc, BrokenPipeError):
            _silence_stdout()
            return ExitCode.OK
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or ExitCode.OK
        _error(str(exc.code))
        return ExitCode.FAILURE
    except BrokenPipeError:
        _silence_stdout()
        return ExitCode.OK
    except OSError as exc:
        if _debug():
            traceback.print_exc()
        code, message = classify_os_error(exc)
        _error(message)
        return code
    except Exception as exc:
        if _debug():
            traceback.print_exc()
        detail = f": {exc}" if str(exc) else ""
        hint = "" if _debug() else f" (set {DEBUG_ENV}=1 for a traceback)"
        _error(f"unexpected {type(exc).__name__}{detail}{hint}")
        return ExitCode.FAILURE


if __name__ == "__main__":
    sys.exit(main())

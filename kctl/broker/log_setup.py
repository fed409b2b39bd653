"""Where the broker's log lines go and how they look, from its ``log.*`` output properties
(kctl.broker.properties.log_output): one handler on the root logger, so every line — kctl's, the
libraries' (asyncio, kazoo), Python's warnings and the uncaught exceptions of threads — has the one
format:

- ``text`` (the default): ``2026-11-28T09:31:13.123Z INFO kctl.broker: message``, the timestamp ISO
  8601 in UTC with milliseconds, a traceback on the lines after it;
- ``json``: one object per line, ``{"ts", "level", "logger", "message"}``, plus ``"exception"`` (the
  traceback, one string) when there is one and ``"request"`` (its fields as an object) on the
  request log's lines (kctl.broker.request_log).

The levels: ``log.level`` (or ``--log-level``) for the root, then ``log.level.<logger>`` for each
logger named. A file (``--daemon``, ``--log-file``) is rotated by size (``log.file.max.bytes``,
``log.file.backups``) with the stdlib's RotatingFileHandler; stderr is never rotated."""

from __future__ import annotations

import json
import logging
import logging.handlers
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from kctl.broker.properties.log_output import level_number
from kctl.common.ratelimit import RateLimitFilter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def iso_timestamp(created: float) -> str:
    """``2026-11-28T09:31:13.123Z``: a record's time, ISO 8601 in UTC, milliseconds."""
    seconds = int(created)
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int((created - seconds) * 1000):03d}Z"
    )


class TextFormatter(logging.Formatter):
    """``TIMESTAMP LEVEL LOGGER: MESSAGE``, the timestamp ISO 8601 in UTC."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso_timestamp(record.created)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message; exception (a traceback) and request (the
    request log's fields) when the record has them."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "ts": iso_timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = record.exc_text
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        request = getattr(record, "request", None)
        if request is not None:
            document["request"] = request
        return json.dumps(document, ensure_ascii=False, default=str)


def make_handler(
    log_file: Path | None, *, log_format: str, max_bytes: int = 0, backups: int = 1
) -> logging.Handler:
    """The handler of the broker's log: stderr, or ``log_file`` rotated at ``max_bytes`` (0: never)."""
    handler: logging.Handler
    if log_file is None:
        import sys

        handler = logging.StreamHandler(sys.stderr)
    else:
        handler = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
    handler.setFormatter(JsonFormatter() if log_format.lower() == "json" else TextFormatter())
    # kazoo logs each reconnection attempt (about one a second while ZooKeeper is down): at most one
    # line of each kind a minute, with the count of those held back
    handler.addFilter(RateLimitFilter(("kazoo",)))
    return handler


def setup_logging(config: Any, log_file: Path | None, level: str | None = None) -> None:
    """Send the broker's log to stderr or ``log_file``, in ``config``'s format and levels; ``level``
    (``--log-level``) overrides ``log.level``."""
    handler = make_handler(
        log_file,
        log_format=config["log.format"],
        max_bytes=config["log.file.max.bytes"],
        backups=config["log.file.backups"],
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level_number(level or config["log.level"]))
    logging.getLogger("kazoo").setLevel(logging.WARNING)  # unless log.level.kazoo says otherwise
    for name, number in config.logger_levels.items():
        logging.getLogger(name).setLevel(number)
    logging.captureWarnings(True)  # Python's warnings: the py.warnings logger, in the same format
    threading.excepthook = _log_thread_exception


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    """An exception no thread caught: logged (a daemon's stderr is /dev/null), not printed."""
    if args.exc_type is SystemExit:
        return
    thread = args.thread.name if args.thread is not None else "?"
    exc_info: tuple[type[BaseException], BaseException, TracebackType | None] = (
        args.exc_type,
        args.exc_value if args.exc_value is not None else args.exc_type(),
        args.exc_traceback,
    )
    logging.getLogger("kctl.broker").error("uncaught exception in thread %s", thread, exc_info=exc_info)

"""The broker's own log (its log lines, not the partition logs): levels per logger, the line format,
the request log, and the rotation of the log file (kctl.broker.log_setup applies them).

``log.level.<logger>=LEVEL`` sets one logger's level (and its children's), as log4j's
``log4j.logger.<name>`` does for Kafka; those properties are a family, not keys of the table: they are
read by :func:`logger_levels`."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kctl.broker.properties.key import HIGH, LOW, broker_key
from kctl.common.config_def import ConfigError, OneOf, Range
from kctl.common.config_def import ConfigType as T

#: the prefix of the per-logger level properties
LOGGER_LEVEL_PREFIX = "log.level."
#: the logger of the request log (Kafka's kafka.request.logger, whose name is accepted too)
REQUEST_LOGGER = "kctl.request"
KAFKA_REQUEST_LOGGER = "kafka.request.logger"

#: level names as log4j and Python spell them -> Python's level (TRACE is DEBUG: Python has no finer
#: level; OFF silences the logger)
LEVELS: dict[str, int] = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}
_LEVEL = OneOf(tuple(LEVELS), case_insensitive=True)

LOG_OUTPUT_CONFIGS = [
    broker_key(
        "log.level",
        T.STRING,
        "INFO",
        _LEVEL,
        "kctl: the level of the broker's log (the root logger; --log-level wins over it). "
        "log.level.LOGGER=LEVEL sets one logger's and its children's, e.g. "
        "log.level.kctl.broker.group=DEBUG; log.level.kctl.request=DEBUG turns the request log on "
        "(one line per request: API, version, correlation id, client id, principal, client address, "
        "sizes and times; Kafka's kafka.request.logger, a name that works too). Loggers: kctl.broker "
        "(and .server, .group, .replication, .security, .quotas, ...), kctl.controller, kctl.log, "
        "kctl.zk, kctl.request, kazoo.",
        importance=HIGH,
    ),
    broker_key(
        "log.format",
        T.STRING,
        "text",
        OneOf(("text", "json"), case_insensitive=True),
        "kctl: text (TIMESTAMP LEVEL LOGGER: MESSAGE, the timestamp ISO 8601 in UTC) or json (one object "
        "per line: ts, level, logger, message, exception if any; the request log's fields under "
        "request), for log shippers.",
    ),
    broker_key(
        "log.file.max.bytes",
        T.LONG,
        100 * 1024 * 1024,
        Range(0),
        "kctl: the size at which the broker's log file (--daemon, or --log-file) is rotated: FILE becomes "
        "FILE.1, FILE.1 becomes FILE.2, ... (0: never rotated).",
        importance=LOW,
    ),
    broker_key(
        "log.file.backups",
        T.INT,
        5,
        Range(1),
        "kctl: how many rotated log files are kept (FILE.1 to FILE.N; the oldest is deleted).",
        importance=LOW,
    ),
]


def level_number(name: str) -> int:
    """Python's level for a level name (any case; WARN, TRACE, OFF too); ValueError otherwise."""
    return LEVELS[_LEVEL(name)]


def logger_levels(properties: Mapping[str, str]) -> dict[str, int]:
    """The ``log.level.<logger>`` properties: logger name -> level (Kafka's request logger's name is
    kctl's); ConfigError for a bad level or a missing logger name."""
    levels: dict[str, int] = {}
    for name, value in properties.items():
        if not name.startswith(LOGGER_LEVEL_PREFIX):
            continue
        logger = name.removeprefix(LOGGER_LEVEL_PREFIX).strip()
        if not logger:
            raise ConfigError(name, "give a logger name: log.level.LOGGER=LEVEL")
        try:
            level = level_number(str(value).strip())
        except ValueError as error:
            raise ConfigError(name, str(error)) from None
        levels[REQUEST_LOGGER if logger == KAFKA_REQUEST_LOGGER else logger] = level
    return levels

"""The broker's loggers as Kafka's BROKER_LOGGER config resource (resource type 8, named by the broker
id): what DescribeConfigs lists — every logger of the broker's process (the root one as ``root``) with
its effective level in log4j's names — and what IncrementalAlterConfigs changes: SET a logger's level,
DELETE it back to the level it had before it was first changed (the configured one: ``log.level``,
``log.level.<logger>``, or none, inheriting its parent's). A change applies at once and is not stored
anywhere: after a restart the configured levels hold again (as Kafka's runtime log levels).

Kafka's rules: only an existing logger can be changed (INVALID_CONFIG otherwise), a level must be one
of the level names (INVALID_CONFIG), the root logger's level cannot be deleted, APPEND and SUBTRACT are
refused (INVALID_REQUEST), as is a resource named by another broker's id (or none).

The sources, as the broker resource's: a level set at runtime is DYNAMIC_BROKER_LOGGER_CONFIG, a level
the logger had from the start (configured) STATIC_BROKER_CONFIG, and an inherited level DEFAULT_CONFIG.
After each change the broker is told (``on_change``): the request log (logger ``kctl.request``) starts
or stops with its logger's level."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kctl.broker.errors import ApiError
from kctl.broker.properties.log_output import KAFKA_REQUEST_LOGGER, LEVELS, REQUEST_LOGGER
from kctl.protocol.configs import AlterConfigOp, ConfigSource
from kctl.protocol.errors import ErrorCode

#: the root logger's name in the resource, as log4j's
ROOT_LOGGER = "root"

#: Python's level -> the name the resource shows (log4j's: WARN, FATAL, OFF)
LEVEL_NAMES = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARN",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "FATAL",
    LEVELS["OFF"]: "OFF",
}


def level_name(level: int) -> str:
    """A level as the resource shows it (log4j's name; Python's for a level between them)."""
    return LEVEL_NAMES.get(level) or logging.getLevelName(level)


@dataclass(frozen=True)
class LoggerLevel:
    """One logger of the resource: its name, effective level and where the level comes from."""

    name: str
    level: str
    source: ConfigSource


class BrokerLoggers:
    """The BROKER_LOGGER resource of broker ``broker_id`` (see the module docstring)."""

    def __init__(self, broker_id: int, on_change: Callable[[], None] = lambda: None) -> None:
        self.broker_id = broker_id
        self._on_change = on_change
        #: logger name -> its own level before its first change at runtime (DELETE restores it)
        self._configured: dict[str, int] = {}

    def check_resource(self, resource_name: str) -> None:
        """ApiError INVALID_REQUEST unless ``resource_name`` is this broker's id (Kafka's checks)."""
        if not resource_name:
            raise ApiError(ErrorCode.INVALID_REQUEST, "a broker logger resource is named by a broker id")
        try:
            broker_id = int(resource_name)
        except ValueError:
            raise ApiError(
                ErrorCode.INVALID_REQUEST, f"the broker id must be an integer, not {resource_name!r}"
            ) from None
        if broker_id != self.broker_id:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"unexpected broker id: this is broker {self.broker_id}, the request names {broker_id}",
            )

    def describe(self, names: Iterable[str] | None = None) -> list[LoggerLevel]:
        """Every logger (root first, then by name), or those of ``names`` that exist."""
        existing = [ROOT_LOGGER, *sorted(logging.root.manager.loggerDict)]
        wanted = None if names is None else {_canonical(n) for n in names}
        return [self._entry(n) for n in existing if wanted is None or n in wanted]

    def _entry(self, name: str) -> LoggerLevel:
        logger = _logger(name)
        if name in self._configured:
            source = ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
        elif logger.level != logging.NOTSET:
            source = ConfigSource.STATIC_BROKER_CONFIG
        else:
            source = ConfigSource.DEFAULT_CONFIG
        return LoggerLevel(name, level_name(logger.getEffectiveLevel()), source)

    def alter(self, operations: Iterable[Any], *, validate_only: bool = False) -> None:
        """Apply IncrementalAlterConfigs ``operations`` (``name``, ``config_operation``, ``value``):
        all of them or, on the first invalid one, none (ApiError)."""
        changes: list[tuple[str, int | None]] = []  # logger, new level (None: back to the configured)
        for op in operations:
            name = _canonical(op.name)
            if name != ROOT_LOGGER and name not in logging.root.manager.loggerDict:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"there is no logger {op.name!r} on this broker")
            if op.config_operation == AlterConfigOp.SET:
                level = LEVELS.get(str(op.value or "").strip().upper())
                if level is None:
                    raise ApiError(
                        ErrorCode.INVALID_CONFIG,
                        f"{op.value!r} is not a log level for {op.name}: one of {', '.join(LEVELS)}",
                    )
                changes.append((name, level))
            elif op.config_operation == AlterConfigOp.DELETE:
                if name == ROOT_LOGGER:
                    raise ApiError(ErrorCode.INVALID_REQUEST, "the root logger's level cannot be deleted")
                changes.append((name, None))
            else:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"a broker logger takes SET or DELETE, not operation {op.config_operation}",
                )
        if validate_only or not changes:
            return
        for name, level in changes:
            logger = _logger(name)
            if level is None:
                if name in self._configured:
                    logger.setLevel(self._configured.pop(name))
                continue
            self._configured.setdefault(name, logger.level)
            logger.setLevel(level)
        self._on_change()


def _canonical(name: str) -> str:
    """The logger a resource config name means (Kafka's request logger's name is kctl's)."""
    return REQUEST_LOGGER if name == KAFKA_REQUEST_LOGGER else name


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)

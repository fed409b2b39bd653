"""One way to define configuration, after Kafka's ``ConfigDef``: a table of :class:`ConfigKey`s.

Each key has a name, a :class:`ConfigType`, a default (or :data:`NO_DEFAULT`: required; ``None``:
null), an optional validator (:class:`Range`, :class:`OneOf`, :class:`Custom`), documentation, an
:class:`Importance`, a :class:`Dynamic` mode (Kafka's read-only / per-broker / cluster-wide labels)
and optional :class:`Synonym`s (``log.retention.ms`` <- ``log.retention.minutes`` / ``.hours``)::

    TOPIC = ConfigDef("topic", [
        ConfigKey("retention.ms", ConfigType.LONG, 604_800_000, Range(-1), "How long ..."),
    ])
    TOPIC.parse({"retention.ms": "1000"}).values          # {"retention.ms": 1000}

One parser per type (:func:`parse_value`): booleans as Kafka parses them (``true``/``false``, any
case), ints and longs within their widths, doubles, lists (comma-separated), strings (trimmed).
Every problem is a :class:`ConfigError` whose message starts with the key. A definition is a
read-only mapping name -> key, so ``name in TOPIC`` and ``TOPIC.keys()`` work. ``describe()`` gives
the rows that documentation is generated from. This module imports nothing from kctl.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that cannot be used. ``ConfigError(key, reason)`` reads "key: reason";
    ``ConfigError(message)`` is a whole message (a problem of no single key)."""

    def __init__(self, key: str | None, reason: str | None = None) -> None:
        if reason is None:
            key, reason = None, key or ""
        super().__init__(f"{key}: {reason}" if key else reason)
        self.key = key
        self.reason = reason


class ConfigType(enum.StrEnum):
    """The type of a config value (Kafka's ``ConfigDef.Type``)."""

    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"
    CLASS = "class"
    PASSWORD = "password"


class Importance(enum.StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Dynamic(enum.StrEnum):
    """How a config can be changed while running (Kafka's dynamic update modes of broker configs);
    ``PER_TOPIC`` marks topic configs, which AlterConfigs changes per topic."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"
    PER_TOPIC = "per-topic"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
"""The default of a required key: parsing fails when it is not given."""


# -- parsers, one per type ------------------------------------------------------------------------
def parse_bool(key: str, value: object) -> bool:
    """``true``/``false`` in any case, blanks around ignored (Kafka's rule), or a bool."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ConfigError(key, f"expected true or false, got {value!r}")


def parse_int(key: str, value: object, low: int = LONG_MIN, high: int = LONG_MAX) -> int:
    """A decimal integer (or an int) within ``[low, high]`` (the type's width)."""
    if isinstance(value, bool):
        raise ConfigError(key, f"expected an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ConfigError(key, f"expected an integer, got {value!r}") from None
    if not low <= number <= high:
        raise ConfigError(key, f"{number} does not fit in the range [{low}, {high}]")
    return number


def parse_double(key: str, value: object) -> float:
    if isinstance(value, bool):
        raise ConfigError(key, f"expected a number, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        raise ConfigError(key, f"expected a number, got {value!r}") from None


def parse_list(key: str, value: object) -> list[str]:
    """Comma-separated items, each trimmed, empty ones dropped; or an iterable of items."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, Iterable):
        items = sorted(value) if isinstance(value, set | frozenset) else list(value)
        return [str(item).strip() for item in items if str(item).strip()]
    raise ConfigError(key, f"expected a comma-separated list, got {value!r}")


def parse_string(key: str, value: object) -> str:
    return str(value).strip()


_DURATION = re.compile(r"^\s*(-?\d+)\s*(ms|s|m|min|h|d)?\s*$")
_DURATION_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(key: str, value: object) -> int:
    """Milliseconds from ``1500``, ``1500ms``, ``30s``, ``5m``, ``2h`` or ``7d``; negative values
    (``-1``: no limit) are kept as given."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _DURATION.match(str(value))
    if match is None:
        raise ConfigError(key, f"expected a duration (e.g. 500, 500ms, 30s, 5m, 2h, 7d), got {value!r}")
    number = int(match[1])
    return number if number < 0 else number * _DURATION_MS[match[2]]


_PARSERS: dict[ConfigType, Callable[[str, object], Any]] = {
    ConfigType.BOOLEAN: parse_bool,
    ConfigType.INT: lambda key, value: parse_int(key, value, INT_MIN, INT_MAX),
    ConfigType.LONG: parse_int,
    ConfigType.DOUBLE: parse_double,
    ConfigType.STRING: parse_string,
    ConfigType.LIST: parse_list,
    ConfigType.CLASS: parse_string,
    ConfigType.PASSWORD: parse_string,
}


def parse_value(key: str, config_type: ConfigType, value: object) -> Any:
    """``value`` (text, or already of the type) parsed as ``config_type``."""
    return _PARSERS[config_type](key, value)


def format_value(value: Any) -> str | None:
    """The text of a parsed value, as Kafka shows it (``true``, ``a,b``); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, set | frozenset):
        return ",".join(sorted(str(v) for v in value))
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


# -- validators -----------------------------------------------------------------------------------
class Validator:
    """Checks (and may normalise) a parsed value; raises ``ValueError`` with a reason (no key)."""

    def __call__(self, value: Any) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        """The valid values, for docs (``[1,...]``, ``delete, compact``)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    """A number within ``[low, high]``; either bound may be open (None)."""

    low: float | None = None
    high: float | None = None

    def __call__(self, value: Any) -> Any:
        if self.low is not None and value < self.low:
            raise ValueError(f"must be at least {_number(self.low)}, got {value}")
        if self.high is not None and value > self.high:
            raise ValueError(f"must be at most {_number(self.high)}, got {value}")
        return value

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"[{_number(self.low)},...,{_number(self.high)}]"
        if self.low is not None:
            return f"[{_number(self.low)},...]"
        return f"[...,{_number(self.high)}]" if self.high is not None else ""


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class OneOf(Validator):
    """One of ``choices`` (each item, for a list); ``case_insensitive`` keeps the choice's spelling."""

    choices: tuple[str, ...]
    case_insensitive: bool = False

    def _check(self, item: str) -> str:
        for choice in self.choices:
            if item == choice or (self.case_insensitive and item.lower() == choice.lower()):
                return choice
        raise ValueError(f"expected one of {', '.join(self.choices)}, got {item!r}")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._check(item) for item in value]
        return self._check(value)

    def describe(self) -> str:
        return ", ".join(self.choices)


@dataclass(frozen=True)
class Custom(Validator):
    """Any check: ``check(value)`` returns the value to keep or raises ``ValueError``."""

    check: Callable[[Any], Any]
    description: str

    def __call__(self, value: Any) -> Any:
        return self.check(value)

    def describe(self) -> str:
        return self.description


# -- keys and definitions -------------------------------------------------------------------------
@dataclass(frozen=True)
class Synonym:
    """Another name whose value stands in for a key's, times ``factor`` (hours -> ms: 3,600,000);
    negative values (-1: unlimited) are kept as they are."""

    name: str
    factor: int = 1


@dataclass(frozen=True)
class ConfigKey:
    """One property. ``default`` may be given as text or as a value; it is parsed and validated like
    a given value. ``attribute`` is the Python field name (default: dots become underscores)."""

    name: str
    type: ConfigType
    default: Any = NO_DEFAULT
    validator: Validator | None = None
    doc: str = ""
    importance: Importance = Importance.MEDIUM
    dynamic: Dynamic = Dynamic.READ_ONLY
    synonyms: tuple[Synonym, ...] = ()
    attribute: str = ""
    #: False for a config kctl accepts, stores and describes (Kafka compatibility) but does not act on.
    applied: bool = True
    parsed_default: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.attribute:
            object.__setattr__(self, "attribute", self.name.replace(".", "_").replace("-", "_"))
        default = self.default
        parsed = default if default is NO_DEFAULT or default is None else self.parse(default)
        object.__setattr__(self, "parsed_default", parsed)

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, value: object) -> Any:
        """``value`` parsed and validated; a blank text is null when the default is null."""
        if value is None or (self.default is None and isinstance(value, str) and not value.strip()):
            if self.default is None:
                return None
            raise ConfigError(self.name, "must not be empty")
        parsed = parse_value(self.name, self.type, value)
        if self.validator is not None:
            try:
                parsed = self.validator(parsed)
            except ConfigError:
                raise
            except ValueError as error:
                raise ConfigError(self.name, str(error)) from None
        return parsed

    def parser(self) -> Callable[[str, str], Any]:
        """A ``(key, text) -> value`` function for tables keyed by property name."""
        return lambda _key, text: self.parse(text)

    def default_text(self) -> str | None:
        if self.default is NO_DEFAULT:
            return None
        return format_value(self.parsed_default)


@dataclass(frozen=True)
class ParsedConfig:
    """The result of :meth:`ConfigDef.parse`: every key's value (defaults and synonyms filled in),
    the text given for each known key, and the unknown keys given (sorted)."""

    values: dict[str, Any]
    given: dict[str, str]
    unknown: tuple[str, ...]

    def source(self, name: str) -> str:
        return "given" if name in self.given else "default"


class ConfigDef(Mapping[str, ConfigKey]):
    """An ordered table of :class:`ConfigKey`s; ``what`` names it in messages ("topic", "broker")."""

    def __init__(self, what: str, keys: Iterable[ConfigKey], error: type[ConfigError] = ConfigError) -> None:
        self.what = what
        self.error = error
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            if key.name in self._keys:
                raise ValueError(f"{what} config {key.name!r} is defined twice")
            self._keys[key.name] = key

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def extend(
        self, what: str, keys: Iterable[ConfigKey], error: type[ConfigError] | None = None
    ) -> ConfigDef:
        """A new definition with this one's keys followed by ``keys``."""
        return ConfigDef(what, [*self._keys.values(), *keys], error or self.error)

    def default_of(self, name: str) -> Any:
        """The parsed default of ``name`` (for dataclass field defaults)."""
        return self._keys[name].parsed_default

    def parse_value(self, name: str, value: object) -> Any:
        """One value parsed, raising this definition's error type."""
        key = self._keys.get(name)
        if key is None:
            raise self.error(None, f"unknown {self.what} config {name!r}")
        try:
            return key.parse(value)
        except ConfigError as error:
            if isinstance(error, self.error):
                raise
            raise self.error(error.key, error.reason) from None

    def attribute_parsers(self) -> dict[str, tuple[str, Callable[[str, str], Any]]]:
        """name -> (Python attribute, ``(name, text) -> value`` parser raising this definition's
        error), for configuration classes with one field per key."""
        return {name: (key.attribute, self.parse_value) for name, key in self._keys.items()}

    def parse(self, given: Mapping[str, Any], *, allow_unknown: bool = True) -> ParsedConfig:
        """Every key's value from ``given`` (text or values): defaults for absent keys, then
        synonyms for keys still null. Unknown keys are reported in ``unknown``, or are an error
        when ``allow_unknown`` is false."""
        values: dict[str, Any] = {}
        texts: dict[str, str] = {}
        unknown = sorted(str(name) for name in given if name not in self._keys)
        if unknown and not allow_unknown:
            raise self.error(None, f"unknown {self.what} config {unknown[0]!r}")
        for name, key in self._keys.items():
            if name in given:
                values[name] = self.parse_value(name, given[name])
                texts[name] = format_value(given[name]) or ""
            elif key.required:
                raise self.error(name, f"required {self.what} config has no value")
            else:
                values[name] = key.parsed_default
        for name, key in self._keys.items():
            if values[name] is None:
                for synonym in key.synonyms:
                    other = values.get(synonym.name)
                    if other is not None:
                        values[name] = other * synonym.factor if other >= 0 else other
                        break
        return ParsedConfig(values, texts, tuple(unknown))

    def describe(self) -> list[dict[str, Any]]:
        """One row per key, for docs: name, type, default, valid values, importance, dynamic,
        synonyms and documentation."""
        return [
            {
                "name": key.name,
                "type": key.type.value,
                "default": "(required)" if key.required else key.default_text(),
                "valid_values": key.validator.describe() if key.validator is not None else "",
                "importance": key.importance.value,
                "dynamic": key.dynamic.value,
                "synonyms": [s.name for s in key.synonyms],
                "applied": key.applied,
                "documentation": key.doc,
            }
            for key in self._keys.values()
        ]

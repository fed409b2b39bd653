"""The options of the ``kctl`` Spark data source, named like Spark's built-in Kafka source so that a
job ports by changing ``format("kafka")`` to ``format("kctl")``.

Reading: ``kafka.bootstrap.servers`` (``host:port,...`` or the name of a cluster in the clusters
file, as ``-b NAME`` takes it: its bootstrap servers and client properties, e.g. security settings;
the file is ``clustersFile`` when given, else ``KCTL_CLUSTERS``, else
``~/.config/kctl/clusters.toml``; names are resolved on the driver, so executors need no clusters
file); exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a Java-style
regex matched against whole topic names) or ``assign`` (``{"topic": [0, 1]}``);
``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest`` or
``{"topic": {"0": 23, "1": -2}}`` with -2 = earliest, -1 = latest); ``startingTimestamp`` (epoch
ms, every partition) / ``startingOffsetsByTimestamp`` (``{"topic": {"0": 1700000000000}}``);
``minPartitions``; ``maxOffsetsPerTrigger``; ``includeHeaders``; ``failOnDataLoss``;
``kafkaConsumer.pollTimeoutMs``. Writing: ``topic`` (else each row's ``topic`` column). Every
other ``kafka.``-prefixed option is a client property (``kafka.client.id``, ``kafka.acks``,
``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ...) with the prefix removed; it wins
over a named cluster's. ``kafka.isolation.level=read_committed`` (Spark's option, the consumer's
``isolation.level``) makes ``latest`` the last stable offset and the readers skip aborted
transactions (``kctl.client``'s consumer); control batches are never rows at either level.

Option names are case-insensitive, as in Spark. Parsing is plain Python (no pyspark import), so the
rules are testable without Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kctl.client import TopicPartition
from kctl.client.clusters_file import ClustersFileError, resolve_cluster

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetBound",
    "SourceOptionError",
    "SourceOptions",
    "parse_options",
]

EARLIEST = -2
"""Spark's (and Kafka's ListOffsets) marker for the log start offset in per-partition JSON."""
LATEST = -1
"""Spark's marker for the end offset (high watermark) in per-partition JSON."""

DEFAULT_POLL_TIMEOUT_MS = 120_000
"""How long a task waits for a fetch to make progress (Spark's ``kafkaConsumer.pollTimeoutMs``)."""


class SourceOptionError(ValueError):
    """A missing, conflicting or malformed option (the message names the option)."""


@dataclass(frozen=True)
class OffsetBound:
    """One end of the ranges to read: ``earliest``/``latest`` for every partition, explicit offsets
    per partition (``offsets``: -2/-1 allowed), or timestamps (``timestamp`` for every partition,
    ``timestamps`` per partition)."""

    kind: Literal["earliest", "latest", "offsets", "timestamp"]
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceOptions:
    """The data source's options, parsed and checked."""

    bootstrap_servers: str
    client_properties: Mapping[str, str]
    cluster_name: str | None = None
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: OffsetBound = OffsetBound("earliest")
    ending: OffsetBound = OffsetBound("latest")
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    topic: str | None = None

    @property
    def has_subscription(self) -> bool:
        return bool(self.subscribe or self.subscribe_pattern or self.assign)

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one this source reads (by subscription or pattern)."""
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        if self.subscribe:
            return topic in self.subscribe
        return any(tp.topic == topic for tp in self.assign)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    lowered = str(text).strip().lower()
    if lowered not in ("true", "false"):
        raise SourceOptionError(f"option {name} must be true or false, got {text!r}")
    return lowered == "true"


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise SourceOptionError(f"option {name} must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise SourceOptionError(f"option {name} must be a positive integer, got {text!r}")
    return value


def _json_object(name: str, text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise SourceOptionError(f"option {name} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise SourceOptionError(f"option {name} must be a JSON object, got {text!r}")
    return value


def parse_partition_map(name: str, text: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -2}}`` -> ``{TopicPartition("topic", 0): 23, ...}``."""
    found: dict[TopicPartition, int] = {}
    for topic, partitions in _json_object(name, text).items():
        if not isinstance(partitions, dict):
            raise SourceOptionError(f"option {name}: topic {topic!r} must map partitions to numbers")
        for partition, number in partitions.items():
            try:
                index = int(partition)
            except ValueError:
                raise SourceOptionError(f"option {name}: partition {partition!r} is not a number") from None
            if not isinstance(number, int) or isinstance(number, bool):
                raise SourceOptionError(f"option {name}: {topic}-{partition} must be an integer")
            found[TopicPartition(topic, index)] = number
    return found


def _offset_bound(options: Mapping[str, str], name: str, default: str, *, ending: bool) -> OffsetBound:
    text = options.get(name.lower())
    if text is None:
        return OffsetBound(default)  # type: ignore[arg-type]
    stripped = str(text).strip()
    if stripped.lower() in ("earliest", "latest"):
        if ending and stripped.lower() == "earliest":
            raise SourceOptionError(f"option {name}: 'earliest' is not a valid ending offset")
        return OffsetBound(stripped.lower())  # type: ignore[arg-type]
    offsets = parse_partition_map(name, stripped)
    for tp, offset in offsets.items():
        if offset < EARLIEST or (ending and offset == EARLIEST):
            raise SourceOptionError(f"option {name}: offset {offset} of {tp} is not valid here")
    return OffsetBound("offsets", offsets=offsets)


def _assign(text: str) -> tuple[TopicPartition, ...]:
    partitions: list[TopicPartition] = []
    for topic, indexes in _json_object("assign", text).items():
        if not isinstance(indexes, list) or not all(isinstance(i, int) for i in indexes):
            raise SourceOptionError(f"option assign: topic {topic!r} must map to a list of partitions")
        partitions += [TopicPartition(topic, i) for i in indexes]
    if not partitions:
        raise SourceOptionError("option assign names no partition")
    return tuple(partitions)


def parse_options(raw: Mapping[str, str], *, streaming: bool = False, writing: bool = False) -> SourceOptions:
    """Check and parse the options a DataFrame reader or writer was given (names case-insensitive).
    ``streaming`` changes the default ``startingOffsets`` to ``latest`` (as Spark's Kafka source
    does) and refuses ``endingOffsets``; ``writing`` needs no subscription."""
    options = {str(k).lower(): str(v) for k, v in raw.items()}
    bootstrap = options.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise SourceOptionError("option kafka.bootstrap.servers is required")
    properties = {
        key[len("kafka.") :]: value
        for key, value in options.items()
        if key.startswith("kafka.") and key != "kafka.bootstrap.servers"
    }
    try:
        named = resolve_cluster(bootstrap, options.get("clustersfile"))
    except ClustersFileError as error:
        raise SourceOptionError(f"option kafka.bootstrap.servers: {error}") from None
    if named is not None:  # a named cluster: its servers, and its properties under the options'
        bootstrap = named.bootstrap_servers
        properties = {**named.properties, **properties}
    # Spark lowercases nothing of the values; Kafka's property names are lower case already
    subscribe = tuple(t.strip() for t in options.get("subscribe", "").split(",") if t.strip())
    pattern = options.get("subscribepattern")
    assign = _assign(options["assign"]) if "assign" in options else ()
    given = [name for name, present in (("subscribe", subscribe), ("subscribePattern", pattern),
                                         ("assign", assign)) if present]
    if len(given) > 1:
        raise SourceOptionError(f"give only one of subscribe, subscribePattern and assign, not {given}")
    if not given and not writing:
        raise SourceOptionError("one of the options subscribe, subscribePattern or assign is required")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            raise SourceOptionError(f"option subscribePattern is not a valid regex: {error}") from None

    starting = _offset_bound(options, "startingOffsets", "latest" if streaming else "earliest", ending=False)
    if "startingoffsetsbytimestamp" in options:
        stamps = parse_partition_map("startingOffsetsByTimestamp", options["startingoffsetsbytimestamp"])
        starting = OffsetBound("timestamp", timestamps=stamps)
    elif "startingtimestamp" in options:
        stamp = _positive_int(options, "startingTimestamp")
        starting = OffsetBound("timestamp", timestamp=stamp)
    if streaming and "endingoffsets" in options:
        raise SourceOptionError("option endingOffsets is for batch queries only")
    ending = _offset_bound(options, "endingOffsets", "latest", ending=True)
    poll_timeout = _positive_int(options, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS
    return SourceOptions(
        bootstrap_servers=bootstrap,
        client_properties=properties,
        cluster_name=named.name if named is not None else None,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        min_partitions=_positive_int(options, "minPartitions"),
        max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger"),
        include_headers=_bool(options, "includeHeaders", False),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        poll_timeout_ms=poll_timeout,
        topic=options.get("topic"),
    )


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Per-partition offsets as Spark's Kafka source writes them: ``{"topic": {"0": 23}}``."""
    document: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        document.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return document


def offsets_from_json(document: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The inverse of ``offsets_json``."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in document.items()
        for partition, offset in partitions.items()
    }

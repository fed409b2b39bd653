"""``ProducerConfig``: the producer's settings under Kafka's producer property names.

It extends ``ClientConfig`` (connection, timeouts, retry backoff) with the producer's own keys::

    ProducerConfig.from_properties({"acks": "all", "linger.ms": "10", "compression.type": "lz4"})
    ProducerConfig(acks=1, linger_ms=10, compression_type="lz4")       # Python field names

Defaults are Apache Kafka's, except ``batch.size`` (256 KiB instead of 16 KiB: a Python producer's
cost is per batch and per request as much as per record, and larger batches are what let it keep up
with librdkafka; the broker's default ``message.max.bytes`` is 1 MiB) and ``enable.idempotence``,
which is on unless something rules it out (see ``ProducerConfig.idempotence``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from kctl.client.config import CLIENT_CONFIGS, ClientConfig, ClientConfigError
from kctl.common import config_def
from kctl.common.config_def import ConfigDef, ConfigError, ConfigKey, Custom, Importance, Range
from kctl.common.config_def import ConfigType as T
from kctl.records.compression import CompressionType

MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
"""A broker remembers an idempotent producer's last 5 batches per partition: more in flight than that
could not be deduplicated."""
INT32_MAX = 2**31 - 1


def parse_acks(key: str, text: str | int) -> int:
    """``all``/``-1`` -> -1, ``0``, ``1``."""
    value = str(text).strip().lower()
    if value in ("all", "-1"):
        return -1
    if value in ("0", "1"):
        return int(value)
    raise ClientConfigError(f"{key}: expected all, -1, 0 or 1, got {text!r}")


def parse_compression(key: str, text: str | int) -> str:
    """A codec name (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``), lower case."""
    if isinstance(text, int):
        try:
            return CompressionType(text).label
        except ValueError:
            raise ClientConfigError(f"{key}: unknown compression type {text!r}") from None
    try:
        return CompressionType.from_name(text).label
    except ValueError as error:
        raise ClientConfigError(f"{key}: {error}") from None


def parse_bool(key: str, text: str | bool) -> bool:
    try:
        return config_def.parse_bool(key, text)
    except ConfigError as error:
        raise ClientConfigError(key, error.reason) from None


def _compression_level(value: int | None) -> int | None:
    return None if value == -1 else value


def _level_key(codec: str) -> ConfigKey:
    return ConfigKey(
        f"compression.{codec}.level",
        T.INT,
        None,
        Custom(_compression_level, "the codec's levels; -1: its default"),
        f"The {codec} level (all compression.*.level keys set compression_level); none: the codec's default.",
        Importance.LOW,
        attribute="compression_level",
    )


PRODUCER_CONFIGS = CLIENT_CONFIGS.extend(
    "producer",
    [
        ConfigKey(
            "acks",
            T.STRING,
            "all",
            Custom(lambda value: parse_acks("acks", value), "all, -1, 0, 1"),
            "all (-1): the leader answers once the in-sync replicas have the batch; 1: once the "
            "leader wrote it; 0: no answer at all (offsets are then unknown, -1).",
            Importance.HIGH,
        ),
        ConfigKey(
            "linger.ms",
            T.LONG,
            5,
            Range(0),
            "How long a batch that is not full waits for more records before it is sent.",
        ),
        ConfigKey(
            "batch.size",
            T.INT,
            256 * 1024,
            Range(0),
            "Target size in bytes of one partition's batch (uncompressed); a larger record gets a "
            "batch of its own.",
        ),
        ConfigKey(
            "compression.type",
            T.STRING,
            "none",
            Custom(
                lambda value: parse_compression("compression.type", value), "none, gzip, snappy, lz4, zstd"
            ),
            "Codec applied per batch.",
            Importance.HIGH,
        ),
        _level_key("gzip"),
        _level_key("lz4"),
        _level_key("zstd"),
        ConfigKey(
            "retries",
            T.INT,
            INT32_MAX,
            Range(0),
            "How many times a batch is resent after a retriable error (delivery.timeout.ms bounds it too).",
        ),
        ConfigKey(
            "delivery.timeout.ms",
            T.INT,
            120_000,
            Range(1),
            "Upper bound on the time from send until the record is acknowledged or fails.",
        ),
        ConfigKey(
            "max.in.flight.requests.per.connection",
            T.INT,
            5,
            Range(1),
            "Produce requests sent to one broker and not answered yet.",
            Importance.LOW,
        ),
        ConfigKey(
            "transactional.id",
            T.STRING,
            None,
            None,
            "Makes the producer transactional (init_transactions, begin/commit/abort_transaction); "
            "requires idempotence. A newer producer with the same id fences this one.",
            Importance.LOW,
        ),
        ConfigKey(
            "transaction.timeout.ms",
            T.INT,
            60_000,
            Range(1),
            "How long the transaction coordinator lets a transaction stay open before aborting it.",
            Importance.LOW,
        ),
        ConfigKey(
            "enable.idempotence",
            T.BOOLEAN,
            None,
            None,
            "Producer id and per-partition sequence numbers, so retries never duplicate or reorder. "
            "Not set: on when the broker supports it and acks is not 0, retries > 0 and "
            "max.in.flight.requests.per.connection <= 5; true insists (a configuration error otherwise).",
            Importance.LOW,
        ),
        ConfigKey(
            "partitioner.class",
            T.CLASS,
            None,
            None,
            "default (murmur2 of the key, sticky without a key), round_robin, random, or "
            "module.Class of a custom partitioner.",
        ),
        ConfigKey(
            "max.request.size",
            T.INT,
            1_048_576,
            Range(1),
            "Largest Produce request (and so largest record) sent.",
        ),
        ConfigKey(
            "buffer.memory",
            T.LONG,
            32 * 1024 * 1024,
            Range(1),
            "Bytes of records buffered before send blocks (back-pressure).",
            Importance.HIGH,
        ),
        ConfigKey(
            "max.block.ms",
            T.LONG,
            60_000,
            Range(0),
            "How long send blocks when the buffer is full before raising KafkaTimeoutError.",
        ),
    ],
)
_default = PRODUCER_CONFIGS.default_of


@dataclasses.dataclass(frozen=True)
class ProducerConfig(ClientConfig):
    """Producer settings; each field is a Kafka producer property (``linger_ms`` is ``linger.ms``),
    documented in ``PRODUCER_CONFIGS``."""

    acks: int = _default("acks")
    linger_ms: int = _default("linger.ms")
    batch_size: int = _default("batch.size")
    compression_type: str = _default("compression.type")
    compression_level: int | None = None
    """The codec's level (``compression.gzip.level`` / ``.lz4.level`` / ``.zstd.level``)."""
    retries: int = _default("retries")
    delivery_timeout_ms: int = _default("delivery.timeout.ms")
    max_in_flight_requests_per_connection: int = _default("max.in.flight.requests.per.connection")
    enable_idempotence: bool | None = _default("enable.idempotence")
    transactional_id: str | None = _default("transactional.id")
    transaction_timeout_ms: int = _default("transaction.timeout.ms")
    partitioner_class: str | None = _default("partitioner.class")
    max_request_size: int = _default("max.request.size")
    buffer_memory: int = _default("buffer.memory")
    max_block_ms: int = _default("max.block.ms")

    CONFIG_DEF: ClassVar[ConfigDef] = PRODUCER_CONFIGS
    PROPERTIES: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = (
        PRODUCER_CONFIGS.attribute_parsers()
    )
    IGNORED: ClassVar[frozenset[str]] = frozenset({"bootstrap.servers", "key.serializer", "value.serializer"})

    def __post_init__(self) -> None:
        super().__post_init__()
        # accept Kafka's spellings through the Python names too: acks="all", compression_type="LZ4"
        object.__setattr__(self, "acks", parse_acks("acks", self.acks))
        object.__setattr__(
            self, "compression_type", parse_compression("compression.type", self.compression_type)
        )
        if isinstance(self.enable_idempotence, str):
            object.__setattr__(
                self, "enable_idempotence", parse_bool("enable.idempotence", self.enable_idempotence)
            )
        if self.transactional_id is not None:
            if self.enable_idempotence is False:
                raise ClientConfigError("transactional.id requires enable.idempotence=true")
            object.__setattr__(self, "enable_idempotence", True)  # as Kafka's clients do
        if self.enable_idempotence:
            problems = []
            if self.acks == 0:
                problems.append("acks must not be 0")
            if self.retries == 0:
                problems.append("retries must be above 0")
            if self.max_in_flight_requests_per_connection > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
                problems.append(
                    f"max.in.flight.requests.per.connection must be at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE}"
                )
            if problems:
                raise ClientConfigError(f"enable.idempotence=true: {'; '.join(problems)}")

    @property
    def idempotence(self) -> bool | None:
        """True: required; False: off; None: on if the broker supports InitProducerId.

        Unlike Kafka's Java client, which turns idempotence off by default when acks is not ``all``,
        kctl keeps it for acks=1 too: sequence numbers are what make retries with several batches in
        flight safe, whatever the acks."""
        if self.enable_idempotence is not None:
            return self.enable_idempotence
        if (
            self.acks == 0
            or self.retries == 0
            or self.max_in_flight_requests_per_connection > MAX_IN_FLIGHT_FOR_IDEMPOTENCE
        ):
            return False
        return None

    @property
    def compression(self) -> CompressionType:
        return CompressionType.from_name(self.compression_type)

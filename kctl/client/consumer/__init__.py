"""The consumer package (see ``kctl.client.consumer.consumer`` for how records are fetched): the
public names callers import from ``kctl.client.consumer``."""

from kctl.client.consumer.config import CONSUMER_CONFIGS, ConsumerConfig
from kctl.client.consumer.consumer import Consumer, MembershipHooks
from kctl.client.consumer.fetcher import ConsumerRecord, CorruptRecordError, TimestampType, fetch
from kctl.client.consumer.positions import NoOffsetForPartitionError, OffsetOutOfRangeError

__all__ = [
    "CONSUMER_CONFIGS",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "CorruptRecordError",
    "MembershipHooks",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "TimestampType",
    "fetch",
]

"""The producer package (see ``kctl.client.producer.producer`` for how a record travels): the public
names callers import from ``kctl.client.producer``."""

from kctl.client.producer.batch import (
    DeliveryCallback,
    DeliveryTimeoutError,
    ProducerClosedError,
    RecordFuture,
    RecordMetadata,
)
from kctl.client.producer.producer import HeadersInput, Producer, RecordFields
from kctl.client.producer.transactions import ConsumerGroupMetadata
from kctl.client.producer_config import ProducerConfig

__all__ = [
    "ConsumerGroupMetadata",
    "DeliveryCallback",
    "DeliveryTimeoutError",
    "HeadersInput",
    "Producer",
    "ProducerClosedError",
    "ProducerConfig",
    "RecordFields",
    "RecordFuture",
    "RecordMetadata",
]

"""kctl: a Kafka-compatible distributed commit log and the operator's toolkit around it."""

__version__ = "0.1.0"

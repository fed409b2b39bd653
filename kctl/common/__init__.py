"""Bottom-layer utilities shared by every kctl package (config definitions, the ``TopicPartition``
value type, rate-limited logging of repeated failures). Imports nothing else from kctl."""

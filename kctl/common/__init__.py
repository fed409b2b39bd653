"""Bottom-layer utilities shared by every kctl package (config definitions, the ``TopicPartition``
value type). Imports nothing else from kctl."""

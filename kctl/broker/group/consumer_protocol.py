"""Just enough of the consumer embedded protocol (the ``consumer`` protocol type's subscription
metadata: version, topics, user data, ...) for the coordinator to know which topics a group reads."""

from __future__ import annotations

import struct


def subscription_topics(metadata: bytes) -> set[str]:
    """The topics named by a consumer subscription; an empty set if it does not parse."""
    try:
        position = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, position)
        position += 4
        if count < 0 or count > len(metadata):
            return set()
        topics = set()
        for _ in range(count):
            (size,) = struct.unpack_from(">h", metadata, position)
            position += 2
            if size < 0 or position + size > len(metadata):
                return set()
            topics.add(metadata[position : position + size].decode("utf-8", errors="replace"))
            position += size
        return topics
    except struct.error:
        return set()

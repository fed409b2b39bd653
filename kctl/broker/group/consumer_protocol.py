"""What the coordinator reads of the consumer embedded protocol: the topics a ``consumer``
subscription names (JoinGroup metadata, declared in ``kctl.protocol.messages.consumer_protocol``)."""

from __future__ import annotations

from kctl.protocol.exceptions import ProtocolDecodeError
from kctl.protocol.messages.consumer_protocol import SUBSCRIPTION


def subscription_topics(metadata: bytes) -> set[str]:
    """The topics named by a consumer subscription; an empty set if it does not parse."""
    try:
        return set(SUBSCRIPTION.decode(metadata, allow_trailing=True)[1].topics)
    except ProtocolDecodeError:
        return set()

"""The consumer's fetch sessions (KIP-227): one ``FetchSessionHandler`` per broker it fetches from,
and the Fetch requests they shape.

A consumer's first Fetch to a broker is a full one (session id 0, epoch 0) naming every partition
it fetches there; the broker answers with a session id, and the following Fetches are incremental:
they name only the partitions whose fetch offset changed since they were last sent (those that
returned records, were seeked, or are new to the session) and forget (``forgotten_topics_data``)
those not fetched this time — unassigned, paused, backing off, resetting or with enough buffered —
as Java's Fetcher does (its fetch builder holds the partitions fetchable now). A partition an
incremental response leaves out had nothing new: its position stays. A session error
(FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH), a lost connection or a response that does
not answer the request make the next Fetch a full one naming the old id (closing it on the broker);
``close`` ends every session with a Fetch at epoch -1, as Java's consumer does when it closes.
Fetch versions below 7 have no sessions: their requests are full, sessionless ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kctl.client.consumer.fetcher import build_fetch_request
from kctl.common.topic_partition import TopicPartition
from kctl.protocol.fetch_session_handler import INVALID_SESSION_ID, FetchData, FetchSessionHandler
from kctl.protocol.messages.fetch import FetchRequest

FETCH_SESSION_MIN_VERSION = 7
"""The first Fetch version with session ids and epochs."""
FINAL_EPOCH = -1


class FetchSessions:
    """The consumer's fetch sessions, one per broker (node id)."""

    __slots__ = ("_handlers",)

    def __init__(self) -> None:
        self._handlers: dict[int, FetchSessionHandler] = {}

    def request(
        self,
        node: int,
        version: int,
        parts: Sequence[tuple[TopicPartition, int]],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        partition_max_bytes: int,
        isolation_level: int,
        rack_id: str = "",
    ) -> tuple[FetchRequest, dict[TopicPartition, FetchData], int]:
        """The Fetch to ``node`` for these ``(partition, fetch offset)`` pairs (from the consumer in
        ``rack_id``), what it wants of each partition and its session epoch (for ``response``)."""
        wanted = {tp: (offset, -1, -1, partition_max_bytes) for tp, offset in parts}
        session_id, epoch = INVALID_SESSION_ID, FINAL_EPOCH
        forgotten: list[TopicPartition] = []
        listed = parts
        if version >= FETCH_SESSION_MIN_VERSION:
            handler = self._handlers.get(node)
            if handler is None:
                handler = self._handlers[node] = FetchSessionHandler()
            session_id, epoch, to_send, forgotten = handler.next_request(wanted)
            if to_send is not wanted:
                listed = [(tp, offset) for tp, offset in parts if tp in to_send]
        body = build_fetch_request(
            listed,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            partition_max_bytes=partition_max_bytes,
            isolation_level=isolation_level,
            session_id=session_id,
            session_epoch=epoch,
            forgotten=forgotten,
            rack_id=rack_id,
        )
        return body, wanted, epoch

    def response(self, node: int, wanted: dict[TopicPartition, FetchData], epoch: int, response: Any) -> bool:
        """Take in ``node``'s answer to a Fetch from ``request``; False when it was a session error
        (the response holds nothing else; the next Fetch is a full one)."""
        handler = self._handlers.get(node)
        if epoch == FINAL_EPOCH or handler is None:
            return True
        error_code = getattr(response, "error_code", 0)
        return handler.response(wanted, epoch, error_code, getattr(response, "session_id", 0))

    def failed(self, node: int) -> None:
        """The Fetch to ``node`` got no answer: whether the broker took its epoch is unknown."""
        handler = self._handlers.get(node)
        if handler is not None:
            handler.reset()

    def closing(self) -> list[tuple[int, FetchRequest]]:
        """The Fetches that close the open sessions (epoch -1, no partitions); forgets them."""
        out = [
            (
                node,
                build_fetch_request(
                    [],
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=1,
                    partition_max_bytes=1,
                    session_id=handler.session_id,
                    session_epoch=FINAL_EPOCH,
                ),
            )
            for node, handler in self._handlers.items()
            if handler.session_id != INVALID_SESSION_ID
        ]
        self._handlers.clear()
        return out

    def session_id(self, node: int) -> int:
        """The id of the session with ``node`` (0: none)."""
        handler = self._handlers.get(node)
        return INVALID_SESSION_ID if handler is None else handler.session_id

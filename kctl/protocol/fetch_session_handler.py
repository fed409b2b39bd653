"""The fetcher's side of a fetch session (KIP-227, Kafka's FetchSessionHandler), sans-io so that the
replica fetcher and the client consumer can share it: which session id and epoch the next Fetch
names, and which partitions it must list.

Without a session (or after any doubt about it) the next fetch is a full one at epoch 0 naming every
partition wanted, and the leader may answer with a new session id. With one, the fetch is
incremental at the session's epoch: it lists only the partitions that are new to the session or
whose fetch offset, leader epoch, log start offset or maximum bytes changed since they were last
sent, and forgets (``forgotten_topics_data``) those no longer wanted — so an idle follower's fetch
names no partition at all. A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR), a response without a session, or a request whose outcome is unknown
(the connection failed) make the next fetch a full one; one that names the old session closes it
on the leader."""

from __future__ import annotations

from kctl.common.topic_partition import TopicPartition
from kctl.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
MAX_EPOCH = 0x7FFFFFFF

#: what a fetch says of one partition: (fetch offset, current leader epoch, log start offset, max bytes)
FetchData = tuple[int, int, int, int]
_SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)


class FetchSessionHandler:
    """One fetcher's session with one leader."""

    __slots__ = ("epoch", "sent", "session_id")

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        #: the partitions the leader's session holds, with what was last sent for each
        self.sent: dict[TopicPartition, FetchData] = {}

    def next_request(
        self, wanted: dict[TopicPartition, FetchData]
    ) -> tuple[int, int, dict[TopicPartition, FetchData], list[TopicPartition]]:
        """(session id, epoch, partitions to list, partitions to forget) of the next fetch."""
        if self.session_id == INVALID_SESSION_ID or self.epoch == INITIAL_EPOCH:
            return self.session_id, INITIAL_EPOCH, wanted, []
        sent = self.sent
        to_send = {tp: data for tp, data in wanted.items() if sent.get(tp) != data}
        forgotten = [tp for tp in sent if tp not in wanted]
        return self.session_id, self.epoch, to_send, forgotten

    def response(
        self, wanted: dict[TopicPartition, FetchData], epoch: int, error_code: int, session_id: int
    ) -> bool:
        """Take in the answer to the fetch made with ``next_request(wanted)`` at ``epoch``; False
        when it was a session error (nothing else in it: the next fetch is a full one)."""
        if error_code:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.reset()
            return error_code not in _SESSION_ERRORS
        if session_id == INVALID_SESSION_ID:  # no session opened, or the leader closed it
            self.session_id = INVALID_SESSION_ID
            self.reset()
            return True
        if epoch == INITIAL_EPOCH or session_id != self.session_id:
            self.session_id = session_id
            self.epoch = 1
        else:
            self.epoch = 1 if self.epoch == MAX_EPOCH else self.epoch + 1
        self.sent = dict(wanted)
        return True

    def reset(self) -> None:
        """The next fetch is a full one (closing the current session, if any, on the leader)."""
        self.epoch = INITIAL_EPOCH
        self.sent = {}

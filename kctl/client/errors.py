"""The client's exceptions: what can go wrong between a kctl client and a broker.

Everything derives from ``KafkaError``:

* ``KafkaConnectionError`` — the TCP connection could not be opened, was closed by the broker, or
  failed while sending or receiving. Retriable (another attempt reconnects).
* ``BrokerNotAnsweringError`` — a ``KafkaConnectionError`` for a broker that has not answered for
  longer than its client gives one (an admin client: ``request.timeout.ms``). Not retriable: the
  operation stops waiting for that broker (``ClusterClient.give_up_after``).
* ``KafkaTimeoutError`` — no response (or no connection) within the time allowed. Retriable.
* ``KafkaProtocolError`` — the broker sent bytes we cannot use (malformed frame, wrong correlation
  id) or we share no version of an API with it (``IncompatibleBrokerError``). Not retriable.
* ``BrokerResponseError`` — the broker answered with a non-zero Kafka error code. ``code`` is the
  number, ``name`` Kafka's name for it (``UNKNOWN_TOPIC_OR_PARTITION``), ``message`` the broker's
  error message if it sent one, ``retriable`` Kafka's retriable flag.

* ``ProducerFencedError`` / ``InvalidProducerEpochError`` — ``BrokerResponseError``s a transactional
  producer gets when a newer one with its ``transactional.id`` took over; ``TransactionAbortedError``
  — a transaction that cannot be committed; ``TransactionStateError`` — transactional calls out of
  order.

A failed connection leaves the ``BrokerConnection`` closed; the cluster client reconnects.
"""

from __future__ import annotations

from kctl.protocol.errors import ErrorCode, error_name, is_retriable


class KafkaError(Exception):
    """Base class of every client error. ``retriable``: whether trying again may succeed."""

    retriable: bool = False


class KafkaConnectionError(KafkaError):
    """The connection to a broker could not be established or broke."""

    retriable = True

    def __init__(self, message: str, *, host: str | None = None, port: int | None = None) -> None:
        super().__init__(message)
        self.host = host
        self.port = port


class BrokerNotAnsweringError(KafkaConnectionError):
    """Broker ``node_id`` has not answered — connections refused or timed out, requests unanswered —
    for ``ClusterClient.give_up_after`` seconds: operations stop retrying it. Not retriable."""

    retriable = False

    def __init__(
        self, message: str, *, node_id: int, host: str | None = None, port: int | None = None
    ) -> None:
        super().__init__(message, host=host, port=port)
        self.node_id = node_id


class KafkaTimeoutError(KafkaError):
    """A connection attempt or a request did not complete in time."""

    retriable = True


class KafkaAuthenticationError(KafkaError):
    """TLS or SASL failed: the broker refused the client's certificate or credentials (or the
    client's settings cannot be used). Not retriable."""


class KafkaProtocolError(KafkaError):
    """The broker's bytes could not be decoded, or did not match the request they answer."""


class IncompatibleBrokerError(KafkaProtocolError):
    """The broker does not speak any version of an API that this client can encode."""

    def __init__(self, message: str, *, api_key: int | None = None) -> None:
        super().__init__(message)
        self.api_key = api_key


class BrokerResponseError(KafkaError):
    """The broker answered with a Kafka error code (anything but NONE)."""

    def __init__(self, code: int, message: str | None = None, *, context: str | None = None) -> None:
        self.code = int(code)
        self.name = error_name(self.code)
        self.message = message or None
        self.context = context
        self.retriable = is_retriable(self.code)
        super().__init__(self._text())

    @property
    def error(self) -> ErrorCode | None:
        """The ``ErrorCode`` member, or None for a code this client does not know."""
        try:
            return ErrorCode(self.code)  # type: ignore[call-arg]  # the value lookup, not the members' __new__
        except ValueError:
            return None

    @property
    def description(self) -> str:
        """The message the broker sent, else the standard description of the code."""
        if self.message:
            return self.message
        error = self.error
        return error.description if error is not None else f"error code {self.code}"

    def _text(self) -> str:
        prefix = f"{self.context}: " if self.context else ""
        return f"{prefix}{self.name}: {self.description}"

    def __reduce__(self) -> tuple[type, tuple[int, str | None]]:
        return (type(self), (self.code, self.message))


class ProducerFencedError(BrokerResponseError):
    """PRODUCER_FENCED: a newer producer with the same ``transactional.id`` (init_transactions
    elsewhere) fenced this one. Fatal: the producer can only be closed."""


class InvalidProducerEpochError(BrokerResponseError):
    """INVALID_PRODUCER_EPOCH: the producer's epoch is older than the coordinator's or the
    partition's (fenced, or its transaction was aborted by a timeout). Fatal for the producer."""


class TransactionAbortedError(KafkaError):
    """The transaction cannot be committed: a record of it failed (``cause``), or it was aborted.
    ``abort_transaction()`` then starts over; the records of the transaction are never visible to
    read_committed consumers."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class TransactionStateError(KafkaError):
    """A transactional call out of order (send before begin_transaction, commit without a
    transaction, a transactional call on a producer without ``transactional.id``)."""


_TYPED: dict[int, type[BrokerResponseError]] = {
    ErrorCode.PRODUCER_FENCED: ProducerFencedError,
    ErrorCode.INVALID_PRODUCER_EPOCH: InvalidProducerEpochError,
}


def response_error(
    code: int, message: str | None = None, *, context: str | None = None
) -> BrokerResponseError:
    """The ``BrokerResponseError`` for ``code``: its typed subclass when it has one
    (``ProducerFencedError``, ``InvalidProducerEpochError``)."""
    return _TYPED.get(int(code), BrokerResponseError)(code, message, context=context)


def check_error(code: int, message: str | None = None, *, context: str | None = None) -> None:
    """Raise ``BrokerResponseError`` (a typed subclass where one exists) unless ``code`` is 0."""
    if code:
        raise response_error(code, message, context=context)

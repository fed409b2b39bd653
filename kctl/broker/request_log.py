"""The request log, Kafka's ``kafka.request.logger``: one DEBUG line on the logger ``kctl.request`` per
request answered, with its API and version, correlation id, client id, principal, listener, client
address, request and response size (bytes on the wire, size prefix included) and Kafka's request
times in milliseconds (total, request queue, local, remote, response send; kctl.broker.server measures
them for the request metrics too) and the quota throttle time::

    Completed request: api=Produce version=9 correlation_id=7 client_id=rdkafka principal=User:ANONYMOUS
    listener=PLAINTEXT client=127.0.0.1:52214 request_bytes=1123 response_bytes=62 total_ms=0.412
    queue_ms=0.031 local_ms=0.298 remote_ms=0.000 send_ms=0.083 throttle_ms=0

(one line; with ``log.format=json`` the fields are also the line's ``request`` object).

Off by default. It is on when the logger is enabled for DEBUG at start (``log.level.kctl.request=DEBUG``
or Kafka's name, ``log.level.kafka.request.logger=DEBUG``; a root at DEBUG turns it on too): only then is
a :class:`RequestLog` given to the listeners as a request observer, so a broker without it pays
nothing per request beyond the server's one ``is not None`` test of its observer (which it makes for
the metrics anyway)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kctl.broker.metrics.stats import kafka_api_name
from kctl.broker.properties.log_output import REQUEST_LOGGER

if TYPE_CHECKING:
    from kctl.broker.request_context import RequestContext
    from kctl.broker.server import RequestObserver

log = logging.getLogger(REQUEST_LOGGER)


def request_log_enabled() -> bool:
    """Whether the request log is on (its logger enabled for DEBUG)."""
    return log.isEnabledFor(logging.DEBUG)


class RequestLog:
    """The request observer of one listener that writes the request log."""

    __slots__ = ("listener",)

    def __init__(self, listener: str) -> None:
        self.listener = listener

    def observe(
        self,
        context: RequestContext,
        request_bytes: int,
        response_bytes: int,
        queue: float,
        local: float,
        remote: float,
        send: float,
        total: float,
    ) -> None:
        header = context.header
        session = context.session
        fields: dict[str, Any] = {
            "api": kafka_api_name(header.api_key),
            "version": header.api_version,
            "correlation_id": header.correlation_id,
            "client_id": header.client_id,
            "principal": session.principal if session is not None else "User:ANONYMOUS",
            "listener": self.listener,
            "client": f"{context.client_host}:{context.client_port}",
            "request_bytes": request_bytes,
            "response_bytes": response_bytes,
            "total_ms": round(total * 1000, 3),
            "queue_ms": round(queue * 1000, 3),
            "local_ms": round(local * 1000, 3),
            "remote_ms": round(remote * 1000, 3),
            "send_ms": round(send * 1000, 3),
            "throttle_ms": context.throttle_time_ms,
        }
        text = " ".join(f"{name}={value}" for name, value in fields.items())
        log.debug("Completed request: %s", text, extra={"request": fields})


def combine(*observers: RequestObserver | None) -> RequestObserver | None:
    """One observer calling each of ``observers`` given (None when none is)."""
    present = [observer for observer in observers if observer is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def each(context: RequestContext, *measures: Any) -> None:
        for observer in present:
            observer(context, *measures)

    return each

"""Request classes that carry their response type, for the type checker.

The generated stubs of the message classes (``scripts/gen_protocol_stubs.py``) give each API's
request class a method ``__kctl_response__`` returning its response class (it exists only in the
stubs: nothing calls it). ``ApiRequest[R]`` matches a request whose response is ``R``, so a function
taking ``body: ApiRequest[R]`` and returning ``R`` — ``BrokerConnection.request``,
``ClusterClient.request``, the broker's dispatch — has its result typed from the request it is given:
``conn.request(ApiKey.METADATA, MetadataRequest(...))`` is a ``MetadataResponse`` to mypy, and a
misspelt field of the answer is an error. (Produce's is ``ProduceResponse | None``: acks=0 gets no
answer.)"""

from __future__ import annotations

from typing import Protocol, TypeVar

R_co = TypeVar("R_co", covariant=True)


class ApiRequest(Protocol[R_co]):
    """A request message whose response is ``R_co`` (see the module docstring)."""

    def __kctl_response__(self) -> R_co: ...

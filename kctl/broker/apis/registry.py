"""The broker's one registration point for API handlers.

A handler module registers its handler once, with the versions the broker answers::

    @api_handler(ApiKey.HEARTBEAT, versions=(0, 4))
    async def handle(broker: GroupServices, context: RequestContext, request: HeartbeatRequest) -> ...:

``handlers()`` imports every module of ``kctl.broker.apis`` (found with ``pkgutil``, so there is no
list to keep) and returns what they registered, by api key; the broker's dispatch table and
``supported_versions()`` — what ApiVersions advertises — are derived from it. Adding an API to the
broker is adding one handler module (next to its schema module in ``kctl.protocol.messages``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import HandlerServices
    from kctl.broker.request_context import RequestContext

#: (broker, request context, decoded request) -> response body, or None for no response (Produce
#: acks=0). Each handler takes the Protocol of what it uses of its broker (kctl.broker.handler_services,
#: each implied by ``HandlerServices``) and its own API's request class; the table holds them all,
#: hence ``Any`` for the request.
Handler = Callable[["HandlerServices", "RequestContext", Any], Awaitable[Any]]
#: what ``api_handler`` accepts: a handler typed against a Protocol of kctl.broker.handler_services
#: that ``HandlerServices`` implies (mypy checks it at each registration;
#: tests/protocol/test_api_registry.py checks where the Protocol comes from)
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True, slots=True)
class ApiHandler:
    """One registered handler: its api key, the (min, max) versions it answers, and where it lives."""

    api_key: ApiKey
    versions: tuple[int, int]
    handle: Handler
    module: str


_registered: dict[int, ApiHandler] = {}
_discovered = False


def api_handler(api_key: ApiKey, *, versions: tuple[int, int]) -> Callable[[H], H]:
    """Register the decorated coroutine function as the handler of ``api_key`` at ``versions``
    (inclusive). Raises ``ValueError`` for an empty range or a second handler of the same key."""
    low, high = versions
    if not 0 <= low <= high:
        raise ValueError(f"{api_key.name}: bad version range {versions}")

    def register(handle: H) -> H:
        existing = _registered.get(int(api_key))
        if existing is not None and existing.module != handle.__module__:
            raise ValueError(f"{api_key.name} is handled by both {existing.module} and {handle.__module__}")
        _registered[int(api_key)] = ApiHandler(ApiKey(api_key), (low, high), handle, handle.__module__)
        return handle

    return register


def handlers() -> dict[int, ApiHandler]:
    """Every registered handler by api key, after importing every handler module once."""
    global _discovered
    if not _discovered:
        import kctl.broker.apis as package

        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.name != __name__.rpartition(".")[2]:
                importlib.import_module(f"{package.__name__}.{info.name}")
        _discovered = True
    return dict(sorted(_registered.items()))


def supported_versions() -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version the broker answers: what ApiVersions advertises."""
    return {key: handler.versions for key, handler in handlers().items()}

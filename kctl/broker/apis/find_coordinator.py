"""FindCoordinator: which broker coordinates a consumer group — the leader of the group's
``__consumer_offsets`` partition — or a transactional id (key type 1) — the leader of its
``__transaction_state`` partition (kctl.broker.transaction). Either topic is created on first use, from
whichever broker is asked. A group needs DESCRIBE on it (GROUP_AUTHORIZATION_FAILED), a transactional id
DESCRIBE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an empty group id is INVALID_GROUP_ID, an empty
transactional id INVALID_REQUEST, another key type INVALID_REQUEST. A topic whose partitions cannot be
created yet (too few brokers, a full disk) answers COORDINATOR_NOT_AVAILABLE (the client retries).

Versions: v0-6. v1+ carry a key type and answer with an error message; v3+ are flexible; v4+ ask for
several keys at once and answer with a list of coordinators."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.security.listeners import advertised_endpoint, request_listener
from kctl.protocol.acl_types import AclOperation, AclResourceType
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import TransactionServices
    from kctl.broker.request_context import RequestContext

log = logging.getLogger("kctl.broker.group")

GROUP, TRANSACTION = 0, 1
FIRST_BATCHED_VERSION = 4


def _unavailable(key: str, message: str, code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)


def _leader(
    broker: TransactionServices, context: RequestContext, key: str, key_type: int
) -> int | Coordinator:
    """The coordinator's broker id, or the error answer."""
    if key_type == TRANSACTION:
        if not key:
            return _unavailable(key, "the transactional id is empty", ErrorCode.INVALID_REQUEST)
        if not context.allowed(AclOperation.DESCRIBE, AclResourceType.TRANSACTIONAL_ID, key):
            denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return _unavailable(key, "not authorized to describe the transactional id", denied)
        try:
            return broker.transactions.coordinator_for(key)
        except ApiError as error:
            return _unavailable(key, error.message, error.code)
    if key_type != GROUP:
        return _unavailable(key, f"unknown key type {key_type}", ErrorCode.INVALID_REQUEST)
    if not key:
        return _unavailable(key, "the group id is empty", ErrorCode.INVALID_GROUP_ID)
    if not context.allowed(AclOperation.DESCRIBE, AclResourceType.GROUP, key):
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return _unavailable(key, "not authorized to describe the group", denied)
    try:
        return broker.groups.coordinator_for(key)
    except ApiError as error:
        return _unavailable(key, error.message, error.code)
    except OSError as error:  # the offsets topic's logs could not be created
        log.warning("no coordinator for group %r: %s", key, error)
        return _unavailable(key, f"the group's partition cannot be created: {error}")


def _coordinator(
    broker: TransactionServices, context: RequestContext, key: str, key_type: int
) -> Coordinator:
    leader = _leader(broker, context, key, key_type)
    if isinstance(leader, Coordinator):
        return leader
    node = next((b for b in broker.metadata.brokers() if b.broker_id == leader), None)
    if node is None:
        return _unavailable(key, "the coordinator is not available yet")
    host, port = advertised_endpoint(node, request_listener(context))
    return Coordinator(
        key=key, node_id=node.broker_id, host=host, port=port, error_code=0, error_message=None
    )


@api_handler(ApiKey.FIND_COORDINATOR, versions=(0, 6))
async def handle(
    broker: TransactionServices, context: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    version = context.header.api_version
    if version >= FIRST_BATCHED_VERSION:
        coordinators = [
            _coordinator(broker, context, key, request.key_type) for key in request.coordinator_keys
        ]
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    found = _coordinator(broker, context, request.key, request.key_type if version >= 1 else GROUP)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=found.error_code,
        error_message=found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )

"""FindCoordinator: which broker coordinates a consumer group — the leader of the group's
``__consumer_offsets`` partition (the topic is created on first use). Transactions are not
supported: a transaction key answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED with the message "transactions
are not supported by this broker" — the one error librdkafka, the Java client and kafka-python all
treat as fatal at this step (librdkafka retries COORDINATOR_NOT_AVAILABLE and UNSUPPORTED_VERSION
until its timeout), so a transactional producer's init_transactions() fails at once. A group whose
``__consumer_offsets`` partition cannot be created (a full disk) answers COORDINATOR_NOT_AVAILABLE
(logged; the client retries).

Versions: v0-6. v1+ carry a key type (only groups are coordinated here) and answer with an error message;
v3+ are flexible; v4+ ask for several keys at once and answer with a list of coordinators."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kctl.broker.apis.registry import api_handler
from kctl.broker.errors import ApiError
from kctl.broker.security.acls import allowed
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
    from kctl.broker.broker import Broker
    from kctl.broker.server import RequestContext

log = logging.getLogger("kctl.broker.group")

GROUP, TRANSACTION = 0, 1
NO_TRANSACTIONS = "transactions are not supported by this broker"
FIRST_BATCHED_VERSION = 4


def _unavailable(key: str, message: str, code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)


def _coordinator(broker: Broker, context: RequestContext, key: str, key_type: int) -> Coordinator:
    if key_type != GROUP:  # fatal in clients, so a transactional producer fails at once
        return _unavailable(key, NO_TRANSACTIONS, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not key:
        return _unavailable(key, "the group id is empty", ErrorCode.INVALID_GROUP_ID)
    if not allowed(broker, context, AclOperation.DESCRIBE, AclResourceType.GROUP, key):
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return _unavailable(key, "not authorized to describe the group", denied)
    try:
        leader = broker.group_coordinator_for(key)
    except ApiError as error:
        return _unavailable(key, error.message, error.code)
    except OSError as error:  # the offsets topic's logs could not be created
        log.warning("no coordinator for group %r: %s", key, error)
        return _unavailable(key, f"the group's partition cannot be created: {error}")
    node = next((b for b in broker.metadata.brokers() if b.broker_id == leader), None)
    if node is None:
        return _unavailable(key, "the coordinator is not available yet")
    host, port = advertised_endpoint(node, request_listener(context))
    return Coordinator(
        key=key, node_id=node.broker_id, host=host, port=port, error_code=0, error_message=None
    )


@api_handler(ApiKey.FIND_COORDINATOR, versions=(0, 6))
async def handle(
    broker: Broker, context: RequestContext, request: FindCoordinatorRequest
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

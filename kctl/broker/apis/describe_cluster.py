"""DescribeCluster: cluster id, controller and live brokers, and, when asked, the operations the
principal may do on the cluster (a KIP-430 bit field, as Metadata answers it: `authorized_operations`).

Versions: v0-1, all flexible. v1+ ask for an endpoint type; only brokers (1) are known, so the answer is
the same."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.broker.apis.metadata import NOT_REQUESTED, authorized_operations
from kctl.broker.apis.registry import api_handler
from kctl.broker.security.listeners import advertised_endpoint, request_listener
from kctl.protocol.acl_types import CLUSTER_NAME, AclResourceType
from kctl.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    from kctl.broker.handler_services import ClusterServices
    from kctl.broker.request_context import RequestContext


@api_handler(ApiKey.DESCRIBE_CLUSTER, versions=(0, 1))
async def handle(
    broker: ClusterServices, context: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    controller = broker.metadata.controller_id
    operations = NOT_REQUESTED
    if request.include_cluster_authorized_operations:
        operations = authorized_operations(broker, context, AclResourceType.CLUSTER, CLUSTER_NAME)
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=broker.metadata.cluster_id,
        controller_id=controller if controller is not None else -1,
        brokers=[
            DescribeClusterBroker(broker_id=b.broker_id, host=host, port=port, rack=b.rack)
            for b in broker.metadata.brokers()
            for host, port in (advertised_endpoint(b, request_listener(context)),)
        ],
        cluster_authorized_operations=operations,
    )

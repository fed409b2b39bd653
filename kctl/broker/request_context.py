"""What a handler knows of a request besides its body, and the authorization checks made on it.

A ``RequestContext`` is built by the connection for each request (kctl.broker.server) and handed to
the API handler with the decoded body. It carries the header, the client's address, the connection's
``Session`` (its principal) and the broker's ``Authorizer`` (set by the broker's dispatch), so a
handler asks ``context.allowed(operation, resource_type, name)`` rather than reaching into the broker
for its security state. Without an authorizer (or outside a connection: no session) everything is
allowed, as in Kafka without ``authorizer.class.name``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.broker.errors import ApiError
from kctl.broker.security.acls import denied_code
from kctl.protocol.acl_types import CLUSTER_NAME, AclOperation, AclResourceType, camel_name
from kctl.protocol.errors import ErrorCode
from kctl.protocol.registry import ApiKey

if TYPE_CHECKING:
    import kctl.protocol as kp
    from kctl.broker.security.acls import Authorizer
    from kctl.broker.security.sasl import Session


@dataclass(slots=True)
class RequestContext:
    """The decoded header (api key and version, correlation id, client id), the client's address, the
    id of its connection, its session, and the authorizer its requests are checked against."""

    header: kp.RequestHeader
    client_host: str
    client_port: int
    connection_id: int
    session: Session | None = None
    #: set by a handler whose client exceeded a quota: the connection is muted that long after the
    #: response (KIP-219)
    throttle_time_ms: int = 0
    #: seconds the handler was parked (acks=all waiting for followers, a fetch long-polling): Kafka's
    #: remote time, added up by the handler for the request metrics
    remote_time: float = 0.0
    #: a second request-metrics name set by the handler (Fetch: FetchConsumer or FetchFollower)
    metric_name: str | None = None
    #: the broker's ACL authorizer (set by its dispatch); None allows everything
    authorizer: Authorizer | None = None

    # -- authorization ---------------------------------------------------------------------------
    def allowed(
        self,
        operation: AclOperation,
        resource_type: AclResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """Whether the request's principal may do ``operation`` on the resource (always, without an
        authorizer or outside a connection). A denial is logged (rate-limited, ``Authorizer.denials``)
        unless ``log_denied`` is False: as Kafka's ``logIfDenied = false``, for checks that only filter
        what a request sees (a topic listing, the authorized operations) or probe before the check
        that decides (Create on the cluster before Create on the topic)."""
        authorizer = self.authorizer
        session = self.session
        if authorizer is None or session is None or not authorizer.enabled:
            return True
        if authorizer.authorize(session.principal, self.client_host, operation, resource_type, name):
            return True
        if log_denied:
            self.log_denial(operation, resource_type, name)
        return False

    def allowed_by_resource_type(self, operation: AclOperation, resource_type: AclResourceType) -> bool:
        """Whether the request's principal may do ``operation`` on some resource of the type
        (``Authorizer.authorize_by_resource_type``; always without an authorizer)."""
        authorizer = self.authorizer
        session = self.session
        if authorizer is None or session is None or not authorizer.enabled:
            return True
        return authorizer.authorize_by_resource_type(
            session.principal, self.client_host, operation, resource_type
        )

    def log_denial(self, operation: AclOperation, resource_type: AclResourceType, name: str) -> None:
        """Report a denial to the authorizer's rate-limited denial log (``Authorizer.denials``)."""
        if self.authorizer is None or self.session is None:
            return
        self.authorizer.denials.denied(
            self.session.principal,
            camel_name(operation),
            camel_name(resource_type),
            name,
            host=self.client_host,
            port=self.client_port,
            request=_request_name(self.header.api_key),
        )

    def require(
        self, operation: AclOperation, resource_type: AclResourceType, name: str = CLUSTER_NAME
    ) -> None:
        """Raise ApiError(TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED) unless ``allowed``."""
        if not self.allowed(operation, resource_type, name):
            what = (
                "the cluster"
                if resource_type == AclResourceType.CLUSTER
                else f"{resource_type.name.lower()} {name!r}"
            )
            raise ApiError(denied_code(resource_type), f"{operation.name} on {what} is not allowed")

    def cluster_action_denied(self, operation: AclOperation) -> tuple[ErrorCode, str] | None:
        """(CLUSTER_AUTHORIZATION_FAILED, message) unless the principal may do ``operation`` on the
        cluster (always allowed without an authorizer)."""
        if self.allowed(operation, AclResourceType.CLUSTER, CLUSTER_NAME):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{operation.name} on the cluster is not allowed"

    def acl_change_denied(self, operation: AclOperation) -> tuple[int, str] | None:
        """For the ACL APIs: SECURITY_DISABLED without an authorizer (nothing to describe or change),
        CLUSTER_AUTHORIZATION_FAILED unless ``operation`` on the cluster is allowed; else None."""
        if self.authorizer is None or not self.authorizer.enabled:
            return ErrorCode.SECURITY_DISABLED, "no authorizer is configured (authorizer.class.name)"
        if not self.allowed(operation, AclResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{operation.name} on the cluster is not allowed"
        return None


def _request_name(api_key: int) -> str:
    """Kafka's name of an API (``Produce``, ``OffsetCommit``) for the denial lines."""
    try:
        return camel_name(ApiKey(api_key))
    except ValueError:
        return f"ApiKey {api_key}"

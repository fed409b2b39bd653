"""``BrokerSecurity``: what a broker holds of security — its listeners' security (protocol, TLS
context, SASL), the security store (ZooKeeper in cluster mode, ``security.json`` otherwise), the
credential lookup SASL/SCRAM uses, the ACL authorizer, and how this broker connects to the others'
inter-broker listener (TLS, SASL credentials)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kctl.broker.security.acls import Authorizer
from kctl.broker.security.inter_broker import InterBrokerSecurity, inter_broker_security
from kctl.broker.security.listeners import ListenerSecurity, SecurityConfigError, listener_security
from kctl.zk.security_store import SecurityStore


class BrokerSecurity:
    def __init__(
        self, properties: Mapping[str, Any], values: Mapping[str, Any], store: SecurityStore
    ) -> None:
        self.store = store
        self._properties = properties
        self._values = values
        self._inter_broker: dict[str, InterBrokerSecurity] = {}
        super_users = [u.strip() for u in (values.get("super.users") or "").split(";") if u.strip()]
        self.authorizer = Authorizer(
            store,
            enabled=bool((values.get("authorizer.class.name") or "").strip()),
            super_users=super_users,
            allow_if_no_acl=bool(values.get("allow.everyone.if.no.acl.found")),
        )

    def listener(self, name: str) -> ListenerSecurity:
        return listener_security(self._properties, self._values, name)

    def inter_broker(self, listener: str) -> InterBrokerSecurity:
        """How to connect to the other brokers' listener ``listener`` (built once per listener)."""
        key = listener.upper()
        if key not in self._inter_broker:
            self._inter_broker[key] = inter_broker_security(self._properties, self._values, key)
        return self._inter_broker[key]

    @property
    def inter_broker_listener(self) -> str | None:
        """``inter.broker.listener.name``, else the listener named by ``security.inter.broker.protocol``
        (None: the other brokers' first listener)."""
        return self._values.get("inter.broker.listener.name") or self._values.get(
            "security.inter.broker.protocol"
        )

    def check_inter_broker(self, listeners: list[str]) -> None:
        """At start in cluster mode: the inter-broker listener is one of this broker's listeners, and
        what connecting to it takes (key material, credentials) is configured."""
        if self._values.get("inter.broker.listener.name") and self._values.get(
            "security.inter.broker.protocol"
        ):
            raise SecurityConfigError(
                "set inter.broker.listener.name or security.inter.broker.protocol, not both (as Kafka)"
            )
        wanted = self.inter_broker_listener
        if wanted is None:
            return
        if wanted.upper() not in {name.upper() for name in listeners}:
            raise SecurityConfigError(
                f"inter.broker.listener.name={wanted} is not one of the listeners ({', '.join(listeners)})"
            )
        self.inter_broker(wanted)

    def credentials(self, user: str) -> dict[str, str]:
        """SCRAM credentials of ``user`` (blocking: ZooKeeper or the file)."""
        return self.store.user_credentials(user)

    def close(self) -> None:
        self.store.close()

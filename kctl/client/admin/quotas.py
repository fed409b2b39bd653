"""Client quota admin calls: DescribeClientQuotas and AlterClientQuotas (any broker answers; the
quotas live in the cluster's registry). An entity is a mapping of entity type (``user``,
``client-id``) to a name, None being that type's default."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kctl.client.admin.base import AdminBase
from kctl.client.errors import BrokerResponseError
from kctl.protocol import ApiKey
from kctl.protocol.messages.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    AlterClientQuotasEntry,
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    QuotaEntityData,
    QuotaFilterComponent,
    QuotaOpData,
)

#: entity type -> name (None: the default entity of that type)
QuotaEntity = Mapping[str, str | None]
#: what a filter component matches: a name, DEFAULT (the default entity) or ANY (any name)
DEFAULT = object()
ANY = object()


@dataclass(frozen=True)
class ClientQuota:
    """One configured entity and its quota values."""

    entity: dict[str, str | None]
    values: dict[str, float]

    def row(self) -> dict[str, Any]:
        def show(name: str | None) -> str:
            return "<default>" if name is None else name

        return {
            "user": show(self.entity["user"]) if "user" in self.entity else None,
            "client_id": show(self.entity["client-id"]) if "client-id" in self.entity else None,
            **{k: (int(v) if v == int(v) else v) for k, v in sorted(self.values.items())},
        }


@dataclass(frozen=True)
class QuotaAlteration:
    """Set (value) or remove (None) quota keys of one entity."""

    entity: dict[str, str | None]
    ops: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaAlterationResult:
    entity: dict[str, str | None]
    error_code: int = 0
    error_message: str | None = None


def _entity_data(entity: QuotaEntity) -> list[QuotaEntityData]:
    return [QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity.items()]


class QuotaAdmin(AdminBase):
    """Client quotas (see the module docstring)."""

    def _any_broker(self, api_key: int, body: Any, timeout: float | None) -> Any:
        deadline = self._deadline(timeout)

        def call() -> Any:
            conn = self.cluster.any_connection(deadline=deadline)
            return conn.request(api_key, body, timeout=deadline.timeout(self.config.request_timeout))

        return self.cluster.retry(call, deadline=deadline)

    def describe_client_quotas(
        self,
        components: Mapping[str, object] | None = None,
        *,
        strict: bool = False,
        timeout: float | None = None,
    ) -> list[ClientQuota]:
        """The configured quotas matching ``components`` (entity type -> a name, ``DEFAULT`` or
        ``ANY``); every entity without components. ``strict``: only entities of exactly those types."""
        filters = []
        for entity_type, match in (components or {}).items():
            if match is DEFAULT:
                filters.append(QuotaFilterComponent(entity_type=entity_type, match_type=MATCH_DEFAULT))
            elif match is ANY:
                filters.append(QuotaFilterComponent(entity_type=entity_type, match_type=MATCH_SPECIFIED))
            else:
                filters.append(
                    QuotaFilterComponent(entity_type=entity_type, match_type=MATCH_EXACT, match=str(match))
                )
        r = self._any_broker(
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            DescribeClientQuotasRequest(components=filters, strict=strict),
            timeout,
        )
        if r.error_code:
            raise BrokerResponseError(r.error_code, r.error_message, context="DescribeClientQuotas")
        return [
            ClientQuota(
                entity={e.entity_type: e.entity_name for e in entry.entity},
                values={v.key: v.value for v in entry.values},
            )
            for entry in r.entries or []
        ]

    def alter_client_quotas(
        self, alterations: list[QuotaAlteration], *, validate_only: bool = False, timeout: float | None = None
    ) -> list[QuotaAlterationResult]:
        """Set or remove quota values; one result per alteration (Kafka's error name and message)."""
        if not alterations:
            return []
        request = AlterClientQuotasRequest(
            entries=[
                AlterClientQuotasEntry(
                    entity=_entity_data(a.entity),
                    ops=[
                        QuotaOpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                        for k, v in a.ops.items()
                    ],
                )
                for a in alterations
            ],
            validate_only=validate_only,
        )
        r = self._any_broker(ApiKey.ALTER_CLIENT_QUOTAS, request, timeout)
        return [
            QuotaAlterationResult(
                entity={e.entity_type: e.entity_name for e in entry.entity},
                error_code=entry.error_code,
                error_message=entry.error_message,
            )
            for entry in r.entries
        ]

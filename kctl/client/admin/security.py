"""Security admin calls: ACLs (DescribeAcls, CreateAcls, DeleteAcls) and SCRAM users
(DescribeUserScramCredentials, AlterUserScramCredentials; the password is salted here, on the
client, as Kafka's admin client does: only the salt and the salted password travel)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kctl.client.admin.base import AdminBase
from kctl.client.errors import BrokerResponseError
from kctl.common.scram import DEFAULT_ITERATIONS, MECHANISM_CODES, MECHANISM_NAMES, salted_password
from kctl.protocol import ApiKey
from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType, camel_name
from kctl.protocol.messages.acls import (
    AclCreation,
    CreateAclsRequest,
    DeleteAclsFilter,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from kctl.protocol.messages.scram_credentials import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    UserName,
)


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL; in a filter, ANY values and None names match everything."""

    resource_type: AclResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def row(self) -> dict[str, Any]:
        return {
            "resource_type": camel_name(self.resource_type),
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.name,
            "principal": self.principal,
            "host": self.host,
            "operation": camel_name(self.operation),
            "permission": camel_name(self.permission),
        }


@dataclass(frozen=True)
class AclResult:
    binding: AclBinding
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True)
class UserResult:
    user: str
    error_code: int = 0
    error_message: str | None = None
    mechanisms: tuple[tuple[str, int], ...] = ()  # (mechanism, iterations)


class SecurityAdmin(AdminBase):
    """ACLs and SCRAM users (see the module docstring). Each goes to any broker."""

    def _call(self, api_key: int, body: Any, timeout: float | None) -> Any:
        deadline = self._deadline(timeout)

        def call() -> Any:
            conn = self.cluster.any_connection(deadline=deadline)
            return conn.request(api_key, body, timeout=deadline.timeout(self.config.request_timeout))

        return self.cluster.retry(call, deadline=deadline)

    def describe_acls(self, acl_filter: AclBinding, *, timeout: float | None = None) -> list[AclBinding]:
        r = self._call(
            ApiKey.DESCRIBE_ACLS,
            DescribeAclsRequest(
                resource_type_filter=acl_filter.resource_type,
                resource_name_filter=acl_filter.resource_name,
                pattern_type_filter=acl_filter.pattern_type,
                principal_filter=acl_filter.principal,
                host_filter=acl_filter.host,
                operation=acl_filter.operation,
                permission_type=acl_filter.permission,
            ),
            timeout,
        )
        if r.error_code:
            raise BrokerResponseError(r.error_code, r.error_message, context="DescribeAcls")
        return sorted(
            AclBinding(
                AclResourceType(res.resource_type),
                res.resource_name,
                PatternType(res.pattern_type),
                acl.principal,
                acl.host,
                AclOperation(acl.operation),
                AclPermissionType(acl.permission_type),
            )
            for res in r.resources
            for acl in res.acls
        )

    def create_acls(self, bindings: list[AclBinding], *, timeout: float | None = None) -> list[AclResult]:
        if not bindings:
            return []
        r = self._call(
            ApiKey.CREATE_ACLS,
            CreateAclsRequest(
                creations=[
                    AclCreation(
                        resource_type=b.resource_type,
                        resource_name=b.resource_name or "",
                        resource_pattern_type=b.pattern_type,
                        principal=b.principal or "",
                        host=b.host or "*",
                        operation=b.operation,
                        permission_type=b.permission,
                    )
                    for b in bindings
                ]
            ),
            timeout,
        )
        return [
            AclResult(b, res.error_code, res.error_message)
            for b, res in zip(bindings, r.results, strict=True)
        ]

    def delete_acls(self, filters: list[AclBinding], *, timeout: float | None = None) -> list[AclResult]:
        """The ACLs removed (each filter's matches; a failed filter gives one result with its error)."""
        r = self._call(
            ApiKey.DELETE_ACLS,
            DeleteAclsRequest(
                filters=[
                    DeleteAclsFilter(
                        resource_type_filter=f.resource_type,
                        resource_name_filter=f.resource_name,
                        pattern_type_filter=f.pattern_type,
                        principal_filter=f.principal,
                        host_filter=f.host,
                        operation=f.operation,
                        permission_type=f.permission,
                    )
                    for f in filters
                ]
            ),
            timeout,
        )
        out: list[AclResult] = []
        for f, res in zip(filters, r.filter_results, strict=True):
            if res.error_code:
                out.append(AclResult(f, res.error_code, res.error_message))
                continue
            for m in res.matching_acls:
                binding = AclBinding(
                    AclResourceType(m.resource_type),
                    m.resource_name,
                    PatternType(m.pattern_type),
                    m.principal,
                    m.host,
                    AclOperation(m.operation),
                    AclPermissionType(m.permission_type),
                )
                out.append(AclResult(binding, m.error_code, m.error_message))
        return out

    def describe_users(
        self, users: list[str] | None = None, *, timeout: float | None = None
    ) -> list[UserResult]:
        r = self._call(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            DescribeUserScramCredentialsRequest(users=[UserName(name=u) for u in users] if users else None),
            timeout,
        )
        if r.error_code:
            raise BrokerResponseError(r.error_code, r.error_message, context="DescribeUserScramCredentials")
        return [
            UserResult(
                res.user,
                res.error_code,
                res.error_message,
                tuple(
                    (MECHANISM_NAMES.get(c.mechanism, str(c.mechanism)), c.iterations)
                    for c in res.credential_infos
                ),
            )
            for res in r.results
        ]

    def alter_users(
        self,
        upsertions: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
        deletions: list[tuple[str, str]] = (),  # type: ignore[assignment]
        *,
        iterations: int = DEFAULT_ITERATIONS,
        timeout: float | None = None,
    ) -> list[UserResult]:
        """Upsert (user, mechanism, password) and delete (user, mechanism) SCRAM credentials."""
        ups = []
        for user, mechanism, password in upsertions:
            salt = os.urandom(32)
            ups.append(
                ScramCredentialUpsertion(
                    name=user,
                    mechanism=MECHANISM_CODES[mechanism],
                    iterations=iterations,
                    salt=salt,
                    salted_password=salted_password(mechanism, password, salt, iterations),
                )
            )
        dels = [ScramCredentialDeletion(name=u, mechanism=MECHANISM_CODES[m]) for u, m in deletions]
        r = self._call(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            AlterUserScramCredentialsRequest(deletions=dels, upsertions=ups),
            timeout,
        )
        return [UserResult(res.user, res.error_code, res.error_message) for res in r.results]

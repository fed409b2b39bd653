"""ACL authorization with Kafka's model (AclAuthorizer).

An ACL binds a resource pattern (type, name, pattern type LITERAL — the name ``*`` matching every
name — or PREFIXED) to an entry (principal — ``User:*`` matching every principal —, host — ``*``
every host —, operation, ALLOW or DENY). A request by ``principal`` from ``host`` to do ``operation``
on a resource is:

- allowed if the principal is a super user (``super.users``) or the authorizer is off;
- denied if any matching DENY entry names the operation or ALL (deny wins);
- allowed if a matching ALLOW entry names the operation or ALL, or implies it (DESCRIBE is implied
  by READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS);
- otherwise allowed only when no ACL at all matches the resource and
  ``allow.everyone.if.no.acl.found`` is true.

The ACLs are cached in memory and reloaded from the security store when it announces a change."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from kctl.broker.security.audit import DenialLog
from kctl.protocol.acl_types import (
    WILDCARD,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    PatternType,
    camel_name,
    parse_enum,
)
from kctl.protocol.errors import ErrorCode
from kctl.zk.security_store import AclEntry, ResourceKey, SecurityStore

log = logging.getLogger("kctl.broker.authorizer")

_IMPLIED = {
    AclOperation.DESCRIBE: (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.ALTER_CONFIGS,),
}


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: AclResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @property
    def resource_key(self) -> ResourceKey:
        return (camel_name(self.resource_type), self.pattern_type.name, self.resource_name)

    def entry(self) -> AclEntry:
        return {
            "principal": self.principal,
            "permissionType": camel_name(self.permission),
            "operation": camel_name(self.operation),
            "host": self.host,
        }

    @classmethod
    def from_entry(cls, key: ResourceKey, entry: AclEntry) -> AclBinding:
        return cls(
            AclResourceType(parse_enum(AclResourceType, key[0])),
            key[2],
            PatternType(parse_enum(PatternType, key[1])),
            entry["principal"],
            entry.get("host", WILDCARD),
            AclOperation(parse_enum(AclOperation, entry["operation"])),
            AclPermissionType(parse_enum(AclPermissionType, entry["permissionType"])),
        )

    def validate(self) -> str | None:
        """Why this binding cannot be created, or None."""
        if self.resource_type in (AclResourceType.ANY, AclResourceType.UNKNOWN):
            return "resource type must be specific"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "pattern type must be LITERAL or PREFIXED"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return "operation must be specific"
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return "permission type must be ALLOW or DENY"
        if ":" not in self.principal:
            return f"principal {self.principal!r} is not TYPE:NAME"
        if not self.resource_name:
            return "empty resource name"
        return None


@dataclass(frozen=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter: ANY / None match everything; pattern MATCH matches the
    ACLs that would apply to the named resource (literal, wildcard and prefixes)."""

    resource_type: AclResourceType = AclResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != AclResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not _pattern_matches(b, self.resource_name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and b.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and b.resource_name != self.resource_name:
                return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != AclOperation.ANY and b.operation != self.operation:
            return False
        return self.permission == AclPermissionType.ANY or b.permission == self.permission


def _pattern_matches(b: AclBinding, name: str) -> bool:
    if b.pattern_type == PatternType.LITERAL:
        return b.resource_name == name or b.resource_name == WILDCARD
    return b.pattern_type == PatternType.PREFIXED and name.startswith(b.resource_name)


class Authorizer:
    """The ACL cache and the decision. ``enabled`` False (no ``authorizer.class.name``) allows all."""

    def __init__(
        self,
        store: SecurityStore,
        *,
        enabled: bool,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.store = store
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.denials = DenialLog()
        """The denials `allowed` reports (rate-limited INFO lines)."""
        self._lock = threading.Lock()
        self._bindings: dict[AclResourceType, list[AclBinding]] = {}
        self.reload()
        store.watch_acls(self.reload)

    def reload(self) -> None:
        try:
            loaded = self.store.all_acls()
        except Exception:
            log.exception("cannot load the ACLs")
            return
        by_type: dict[AclResourceType, list[AclBinding]] = {}
        for key, entries in loaded.items():
            for entry in entries:
                try:
                    binding = AclBinding.from_entry(key, entry)
                except (KeyError, ValueError):
                    log.warning("ignoring malformed ACL %s on %s", entry, key)
                    continue
                by_type.setdefault(binding.resource_type, []).append(binding)
        with self._lock:
            self._bindings = by_type

    def bindings(self) -> list[AclBinding]:
        with self._lock:
            return sorted(b for group in self._bindings.values() for b in group)

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: AclResourceType, name: str
    ) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        with self._lock:
            candidates = [b for b in self._bindings.get(resource_type, ()) if _pattern_matches(b, name)]
        if not candidates:
            return self.allow_if_no_acl
        applicable = [
            b
            for b in candidates
            if (b.principal == principal or b.principal == "User:*")
            and (b.host == host or b.host == WILDCARD)
        ]
        for b in applicable:
            if b.permission == AclPermissionType.DENY and b.operation in (operation, AclOperation.ALL):
                return False
        allowing = (operation, AclOperation.ALL, *_IMPLIED.get(operation, ()))
        return any(b.permission == AclPermissionType.ALLOW and b.operation in allowing for b in applicable)

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: AclResourceType
    ) -> bool:
        """Whether `principal` may do `operation` on *some* resource of the type (Kafka's
        authorizeByResourceType, KIP-679): an ALLOW ACL, literal or prefixed, whether or not a
        resource it covers exists yet, that no DENY ACL covers (a literal ``*`` deny, the same
        literal name, or a deny prefix of its name)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True  # super users, no authorizer, or allow.everyone.if.no.acl.found
        with self._lock:
            applicable = [
                b
                for b in self._bindings.get(resource_type, ())
                if (b.principal == principal or b.principal == "User:*")
                and (b.host == host or b.host == WILDCARD)
                and b.operation in (operation, AclOperation.ALL)
            ]
        denied = [b for b in applicable if b.permission == AclPermissionType.DENY]
        deny_literal = {b.resource_name for b in denied if b.pattern_type == PatternType.LITERAL}
        deny_prefixes = [b.resource_name for b in denied if b.pattern_type == PatternType.PREFIXED]
        if WILDCARD in deny_literal:
            return False
        for b in applicable:
            if b.permission != AclPermissionType.ALLOW:
                continue
            if any(b.resource_name.startswith(prefix) for prefix in deny_prefixes):
                continue
            if b.pattern_type == PatternType.LITERAL and b.resource_name in deny_literal:
                continue
            return True
        return False

    # -- changes (CreateAcls / DeleteAcls) ---------------------------------------------------------
    def create(self, binding: AclBinding) -> None:
        entry = binding.entry()

        def add(acls: list[AclEntry]) -> list[AclEntry]:
            return acls if entry in acls else [*acls, entry]

        self.store.update_acls(binding.resource_key, add)
        self.reload()

    def delete(self, acl_filter: AclFilter) -> list[AclBinding]:
        doomed = [b for b in self.bindings() if acl_filter.matches(b)]
        by_key: dict[ResourceKey, list[AclEntry]] = {}
        for b in doomed:
            by_key.setdefault(b.resource_key, []).append(b.entry())
        for key, entries in by_key.items():

            def remove(acls: list[AclEntry], entries: list[AclEntry] = entries) -> list[AclEntry]:
                return [a for a in acls if a not in entries]

            self.store.update_acls(key, remove)
        self.reload()
        return doomed


def enum_or(cls: type, value: int, unknown: object) -> object:
    try:
        return cls(value)
    except ValueError:
        return unknown


def filter_from_request(f: object, version: int) -> AclFilter:
    return AclFilter(
        resource_type=enum_or(AclResourceType, f.resource_type_filter, AclResourceType.UNKNOWN),  # type: ignore[attr-defined,arg-type]
        resource_name=f.resource_name_filter,  # type: ignore[attr-defined]
        pattern_type=(
            enum_or(PatternType, f.pattern_type_filter, PatternType.UNKNOWN)  # type: ignore[attr-defined,arg-type]
            if version >= 1
            else PatternType.LITERAL
        ),
        principal=f.principal_filter,  # type: ignore[attr-defined]
        host=f.host_filter,  # type: ignore[attr-defined]
        operation=enum_or(AclOperation, f.operation, AclOperation.UNKNOWN),  # type: ignore[attr-defined,arg-type]
        permission=enum_or(AclPermissionType, f.permission_type, AclPermissionType.UNKNOWN),  # type: ignore[attr-defined,arg-type]
    )


_DENIED_CODES = {
    AclResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    AclResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    AclResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    AclResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def denied_code(resource_type: AclResourceType) -> ErrorCode:
    """The error Kafka answers when an operation on a resource of this type is not allowed."""
    return _DENIED_CODES[resource_type]

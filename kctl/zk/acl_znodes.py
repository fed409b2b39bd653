"""The znodes of Kafka's AclAuthorizer (split from kctl.zk.znodes, which owns the JSON helpers and
the table of every path): the ACLs of a resource pattern and the change notifications that make
every broker re-read them."""

from __future__ import annotations

from kctl.zk.znodes import _dumps, _loads

__all__ = ["AclChangeNotificationSequenceZNode", "AclZNode"]


class AclZNode:
    """``/kafka-acl/<resource type>/<name>`` (literal resource patterns) and
    ``/kafka-acl-extended/prefixed/<resource type>/<name>`` (prefixed ones): the ACLs of one
    resource pattern, as Kafka's AclAuthorizer stores them (``ResourceZNode``). An ACL is the JSON
    object Kafka writes (``principal``, ``permissionType``, ``operation``, ``host``)."""

    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"
    LITERAL_ROOT = "/kafka-acl"
    PREFIXED_ROOT = "/kafka-acl-extended/prefixed"

    @classmethod
    def root(cls, pattern_type: str) -> str:
        """The parent of a pattern type's resource types."""
        return cls.PREFIXED_ROOT if pattern_type == cls.PREFIXED else cls.LITERAL_ROOT

    @classmethod
    def path(cls, resource_type: str, pattern_type: str, name: str) -> str:
        return f"{cls.root(pattern_type)}/{resource_type}/{name}"

    @staticmethod
    def encode(acls: list[dict[str, str]]) -> bytes:
        return _dumps({"version": 1, "acls": acls})

    @classmethod
    def decode(
        cls, resource_type: str, pattern_type: str, name: str, data: bytes | None
    ) -> list[dict[str, str]]:
        """The ACLs; none for a znode without data or without an ``acls`` list."""
        if not data:
            return []
        acls = _loads(cls.path(resource_type, pattern_type, name), data).get("acls")
        return list(acls) if isinstance(acls, list) else []


class AclChangeNotificationSequenceZNode:
    """``/kafka-acl-changes/acl_changes_<seq>`` (literal patterns: ``"<resource type>:<name>"``) and
    ``/kafka-acl-extended-changes/acl_changes_<seq>`` (others: a JSON object), persistent
    sequential: "the ACLs of this resource pattern changed, re-read them" (Kafka's
    ``LiteralAclChangeStore`` and ``ExtendedAclChangeStore``)."""

    PREFIX = "acl_changes_"
    LITERAL_PATH = "/kafka-acl-changes"
    EXTENDED_PATH = "/kafka-acl-extended-changes"
    PATHS = (LITERAL_PATH, EXTENDED_PATH)

    @classmethod
    def parent(cls, pattern_type: str) -> str:
        return cls.LITERAL_PATH if pattern_type == AclZNode.LITERAL else cls.EXTENDED_PATH

    @classmethod
    def create_path(cls, pattern_type: str) -> str:
        return f"{cls.parent(pattern_type)}/{cls.PREFIX}"

    @staticmethod
    def encode(resource_type: str, pattern_type: str, name: str) -> bytes:
        if pattern_type == AclZNode.LITERAL:
            return f"{resource_type}:{name}".encode()
        note = {"version": 1, "resourceType": resource_type, "name": name, "patternType": pattern_type}
        return _dumps(note)

"""The wire constants of the ACL APIs (DescribeAcls, CreateAcls, DeleteAcls), defined once for the
broker's authorizer and the admin client: resource types, pattern types, operations and permission
types (Kafka's ``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``), with the
names Kafka writes in ZooKeeper and ``kafka-acls.sh`` accepts."""

from __future__ import annotations

import enum


class AclResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: the resource name of the cluster resource, and the wildcard of names, principals and hosts
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"


def camel_name(value: enum.IntEnum) -> str:
    """Kafka's spelling in ZooKeeper and in kafka-acls.sh: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_enum(cls: type[enum.IntEnum], text: str) -> enum.IntEnum:
    """``"Read"``, ``"read"``, ``"READ"``, ``"ClusterAction"``, ``"cluster-action"`` or ``"3"``."""
    key = text.strip()
    if key.isdigit():
        return cls(int(key))
    wanted = key.replace("-", "").replace("_", "").upper()
    for member in cls:
        if member.name.replace("_", "") == wanted:
            return member
    raise ValueError(f"unknown {cls.__name__} {text!r}")

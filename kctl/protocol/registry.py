"""The registry of API schemas by api key, and the ``ApiKey`` names.

This module owns "which APIs the codec knows, and their codec version ranges". The schemas are
discovered: every module of ``kctl.protocol.messages`` is imported and each module-level ``ApiSchema``
it declares is registered under its api key — adding an API to the codec is adding one module there.
It does not decide what the broker advertises: that is declared next to each broker handler
(``kctl.broker.apis.registry``) and may be narrower.
"""

from __future__ import annotations

import importlib
import pkgutil
from enum import IntEnum

import kctl.protocol.messages as _messages
from kctl.protocol.exceptions import UnsupportedApiError
from kctl.protocol.schema import ApiSchema


class ApiKey(IntEnum):
    """Kafka's api keys (the protocol's whole vocabulary up to DescribeTopicPartitions, not only the
    APIs kctl's codec knows: ``SCHEMAS`` says which those are)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CLIENT_METRICS_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75


def _snake(name: str) -> str:
    """``"OffsetForLeaderEpoch"`` -> ``"OFFSET_FOR_LEADER_EPOCH"`` (the ``ApiKey`` member's name)."""
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()


def discover_schemas() -> dict[int, ApiSchema]:
    """Import every module of ``kctl.protocol.messages`` and collect the ``ApiSchema``s they declare,
    by api key; raises ``ValueError`` on a duplicate key or a schema whose name and key disagree with
    ``ApiKey``."""
    found: dict[int, ApiSchema] = {}
    for info in sorted(pkgutil.iter_modules(_messages.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{_messages.__name__}.{info.name}")
        for value in vars(module).values():
            if not isinstance(value, ApiSchema):
                continue
            other = found.get(value.api_key)
            if other is not None and other is not value:
                raise ValueError(f"api key {value.api_key} declared twice: {other.name} and {value.name}")
            try:
                member = ApiKey(value.api_key)
            except ValueError:
                raise ValueError(f"{value.name}: {value.api_key} is not a Kafka api key") from None
            if member.name != _snake(value.name):
                raise ValueError(f"{value.name}: api key {value.api_key} is {member.name} in Kafka")
            found[value.api_key] = value
    return dict(sorted(found.items()))


SCHEMAS: dict[int, ApiSchema] = discover_schemas()


def get_schema(api_key: int) -> ApiSchema:
    """The schema of ``api_key``; raises ``UnsupportedApiError`` for an unknown key."""
    schema = SCHEMAS.get(api_key)
    if schema is None:
        raise UnsupportedApiError(api_key, -1)
    return schema


def codec_version_ranges() -> dict[int, tuple[int, int]]:
    """``{api_key: (min_version, max_version)}`` the codec can encode and decode."""
    return {k: (s.min_version, s.max_version) for k, s in sorted(SCHEMAS.items())}


def compile_all() -> None:
    """Compile every API's codecs at every version now (otherwise each compiles on first use)."""
    for s in SCHEMAS.values():
        s.compile_all()

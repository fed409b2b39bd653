"""The registry of API schemas by api key, and the ``ApiKey`` names.

This module owns "which APIs the codec knows, and their codec version ranges". It does not decide
what the broker advertises: that is declared next to each broker handler and may be narrower.
"""

from __future__ import annotations

from enum import IntEnum

from kctl.protocol.exceptions import UnsupportedApiError
from kctl.protocol.messages import (
    api_versions,
    configs,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_groups,
    describe_log_dirs,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl,
    sync_group,
)
from kctl.protocol.schema import ApiSchema


class ApiKey(IntEnum):
    """Kafka api keys of the APIs kctl's codec knows."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
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
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60


_ALL: tuple[ApiSchema, ...] = (
    produce.SCHEMA,
    fetch.SCHEMA,
    list_offsets.SCHEMA,
    metadata.SCHEMA,
    offset_commit.SCHEMA,
    offset_fetch.SCHEMA,
    find_coordinator.SCHEMA,
    join_group.SCHEMA,
    heartbeat.SCHEMA,
    leave_group.SCHEMA,
    sync_group.SCHEMA,
    describe_groups.SCHEMA,
    list_groups.SCHEMA,
    sasl.SASL_HANDSHAKE,
    api_versions.SCHEMA,
    create_topics.SCHEMA,
    delete_topics.SCHEMA,
    delete_records.SCHEMA,
    init_producer_id.SCHEMA,
    offset_for_leader_epoch.SCHEMA,
    configs.DESCRIBE_CONFIGS,
    configs.ALTER_CONFIGS,
    describe_log_dirs.SCHEMA,
    sasl.SASL_AUTHENTICATE,
    create_partitions.SCHEMA,
    delete_groups.SCHEMA,
    configs.INCREMENTAL_ALTER_CONFIGS,
    offset_delete.SCHEMA,
    describe_cluster.SCHEMA,
)

SCHEMAS: dict[int, ApiSchema] = {s.api_key: s for s in _ALL}
assert len(SCHEMAS) == len(_ALL), "duplicate api key"
assert set(SCHEMAS) == {k.value for k in ApiKey}, "ApiKey and the registry disagree"


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

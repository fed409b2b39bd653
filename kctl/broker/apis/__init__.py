"""One module per Kafka API the broker answers. Each declares ``API_KEY``, the ``VERSIONS`` it
answers (what ApiVersions advertises is derived from these) and ``async def handle(broker, context,
request) -> response``."""

from __future__ import annotations

from types import ModuleType

from kctl.broker.apis import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sync_group,
)

HANDLER_MODULES: tuple[ModuleType, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    offset_commit,
    offset_fetch,
    find_coordinator,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    describe_groups,
    list_groups,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    init_producer_id,
    describe_configs,
    alter_configs,
    describe_log_dirs,
    create_partitions,
    delete_groups,
    incremental_alter_configs,
    offset_delete,
    describe_cluster,
)


def supported_versions(modules: tuple[ModuleType, ...] = HANDLER_MODULES) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version answered, from the handler modules."""
    return {int(module.API_KEY): module.VERSIONS for module in modules}

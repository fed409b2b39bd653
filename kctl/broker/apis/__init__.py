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
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    find_coordinator,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)

HANDLER_MODULES: tuple[ModuleType, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    find_coordinator,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    describe_configs,
    alter_configs,
    create_partitions,
    incremental_alter_configs,
    describe_cluster,
    init_producer_id,
)


def supported_versions(modules: tuple[ModuleType, ...] = HANDLER_MODULES) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version answered, from the handler modules."""
    return {int(module.API_KEY): module.VERSIONS for module in modules}

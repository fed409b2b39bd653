"""The API registries, without a broker: every handler registered once, inside its schema's versions,
advertising what librdkafka needs; the protocol registry finding every schema module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from pathlib import Path

import pytest

import kctl.broker.apis as apis_package
import kctl.protocol.messages as messages_package
from kctl.broker.apis.registry import api_handler, handlers, supported_versions
from kctl.protocol.data import DataSchema
from kctl.protocol.registry import SCHEMAS, ApiKey, discover_schemas
from kctl.protocol.schema import ApiSchema

HANDLER_MODULES = sorted(
    info.name for info in pkgutil.iter_modules(apis_package.__path__) if info.name != "registry"
)

#: versions librdkafka before 2.11.1 needs the broker to advertise (it picks feature sets by them)
LIBRDKAFKA_NEEDS: dict[ApiKey, set[int]] = {
    ApiKey.PRODUCE: {0, 2, 3, 7},
    ApiKey.FETCH: {2, 4, 10},
    ApiKey.FIND_COORDINATOR: {0},
    ApiKey.OFFSET_COMMIT: {1, 2},
    ApiKey.OFFSET_FETCH: {1},
    ApiKey.JOIN_GROUP: {0},
    ApiKey.SYNC_GROUP: {0},
    ApiKey.HEARTBEAT: {0},
    ApiKey.LEAVE_GROUP: {0},
    ApiKey.LIST_OFFSETS: {1},
    ApiKey.INIT_PRODUCER_ID: {0},
    ApiKey.API_VERSIONS: {0, 1, 2, 3, 4},
}
#: and, once SASL handlers exist
LIBRDKAFKA_NEEDS_FOR_SASL: dict[ApiKey, set[int]] = {
    ApiKey.SASL_HANDSHAKE: {0, 1},
    ApiKey.SASL_AUTHENTICATE: {0},
}


def test_every_handler_module_registers_exactly_one_handler() -> None:
    registered = handlers()
    modules = sorted(handler.module.rpartition(".")[2] for handler in registered.values())
    assert modules == HANDLER_MODULES
    for key, handler in registered.items():
        assert handler.api_key == key
        assert inspect.iscoroutinefunction(handler.handle), handler.module


def test_every_registered_handler_has_a_schema_and_answers_only_versions_it_can_decode() -> None:
    for key, (low, high) in supported_versions().items():
        schema = SCHEMAS.get(key)
        assert schema is not None, f"{ApiKey(key).name} has a handler but no schema"
        assert schema.min_version <= low <= high <= schema.max_version, (ApiKey(key).name, low, high)


def test_advertised_versions_include_what_librdkafka_needs() -> None:
    advertised = supported_versions()
    needs = dict(LIBRDKAFKA_NEEDS)
    if ApiKey.SASL_HANDSHAKE in advertised or ApiKey.SASL_AUTHENTICATE in advertised:
        needs.update(LIBRDKAFKA_NEEDS_FOR_SASL)
    for key, versions in needs.items():
        assert key in advertised, f"{key.name} is not advertised"
        low, high = advertised[key]
        assert versions <= set(range(low, high + 1)), (key.name, advertised[key], sorted(versions))


def test_handlers_take_a_protocol_of_the_broker_the_context_and_their_request_class() -> None:
    """Each handler types its broker with a narrow Protocol of kctl.broker.handler_services that the
    union every handler is handed (HandlerServices) includes."""
    from kctl.broker.handler_services import HandlerServices

    for key, handler in handlers().items():
        names = vars(importlib.import_module(handler.module)) | _typing_names()
        hints = typing.get_type_hints(handler.handle, names)
        broker_type = hints["broker"]
        assert broker_type.__module__ == "kctl.broker.handler_services", handler.module
        assert broker_type in HandlerServices.__mro__, handler.module
        assert hints["context"].__name__ == "RequestContext", handler.module
        assert hints["request"] is SCHEMAS[key].request, handler.module


def _typing_names() -> dict[str, object]:
    from kctl.broker import handler_services
    from kctl.broker.broker import Broker
    from kctl.broker.request_context import RequestContext

    protocols = {name: value for name, value in vars(handler_services).items() if name.endswith("Services")}
    return {"Broker": Broker, "RequestContext": RequestContext, **protocols}


def test_every_handler_module_documents_its_versions() -> None:
    for handler in handlers().values():
        module = importlib.import_module(handler.module)
        doc = module.__doc__ or ""
        low, high = handler.versions
        expected = f"\n\nVersions: v{low} only" if low == high else f"\n\nVersions: v{low}-{high}"
        assert expected in doc, f"{handler.module}: the docstring needs a paragraph {expected.strip()!r}..."
        notes = doc.split("\n\nVersions: ", 1)[1]
        assert len(notes.split()) >= 3, f"{handler.module}: say what the versions differ in (or that not)"


def test_api_handler_refuses_a_second_handler_for_a_key_and_an_empty_range() -> None:
    async def other(broker: object, context: object, request: object) -> None:
        return None

    with pytest.raises(ValueError, match=r"PRODUCE is handled by both kctl\.broker\.apis\.produce and"):
        api_handler(ApiKey.PRODUCE, versions=(0, 11))(other)
    with pytest.raises(ValueError, match="bad version range"):
        api_handler(ApiKey.PRODUCE, versions=(3, 2))
    assert handlers()[ApiKey.PRODUCE].module == "kctl.broker.apis.produce"


def test_protocol_registry_finds_every_schema_of_every_message_module() -> None:
    declared = []
    for info in pkgutil.iter_modules(messages_package.__path__):
        module = importlib.import_module(f"{messages_package.__name__}.{info.name}")
        schemas = [value for value in vars(module).values() if isinstance(value, ApiSchema)]
        data_schemas = [value for value in vars(module).values() if isinstance(value, DataSchema)]
        assert bool(schemas) != bool(data_schemas), (
            f"kctl/protocol/messages/{info.name}.py must declare API schemas or data schemas (one kind)"
        )
        declared.extend(schemas)
    assert sorted(s.api_key for s in declared) == list(SCHEMAS)
    assert all(SCHEMAS[s.api_key] is s for s in declared)
    assert discover_schemas() == SCHEMAS
    for key, schema in SCHEMAS.items():
        assert ApiKey(key).name == "".join(
            "_" + c if c.isupper() and i else c for i, c in enumerate(schema.name)
        ).upper()


def test_adding_an_api_takes_one_schema_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new module in kctl/protocol/messages is found with no other edit (here: a copy of Heartbeat
    declared under a free api key, in a directory added to the package's path)."""
    source = Path(messages_package.__file__).parent / "heartbeat.py"
    text = source.read_text().replace(
        'ApiSchema(12, "Heartbeat",', 'ApiSchema(75, "DescribeTopicPartitions",'
    )
    assert "ApiSchema(75" in text
    (tmp_path / "describe_topic_partitions_example.py").write_text(text)
    monkeypatch.setattr(messages_package, "__path__", [*messages_package.__path__, str(tmp_path)])
    found = discover_schemas()
    assert set(found) == set(SCHEMAS) | {ApiKey.DESCRIBE_TOPIC_PARTITIONS}
    assert found[ApiKey.DESCRIBE_TOPIC_PARTITIONS].name == "DescribeTopicPartitions"

"""Config admin calls: describe topic and broker configs and a broker's loggers (DescribeConfigs, with
synonyms and sources), alter broker configs and logger levels, alter topic configs
(IncrementalAlterConfigs; AlterConfigs with the current overrides against brokers without it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kctl.client.admin.base import AdminBase, Outcome
from kctl.client.admin.results import (
    ConfigEntry,
    ConfigSynonym,
    Result,
    TopicConfigs,
)
from kctl.client.cluster import Deadline
from kctl.client.errors import (
    BrokerResponseError,
)
from kctl.protocol import ApiKey
from kctl.protocol.configs import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AlterConfigOp,
    ConfigResourceType,
    ConfigSource,
)
from kctl.protocol.messages.configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)

BROKER_LOGGER_RESOURCE = ConfigResourceType.BROKER_LOGGER


class ConfigAdmin(AdminBase):
    """Topic and broker configs (see the module docstring)."""

    def describe_topic_configs(
        self, names: Iterable[str], *, keys: Iterable[str] | None = None, timeout: float | None = None
    ) -> list[TopicConfigs]:
        """The configs of several topics (one DescribeConfigs request); one result per topic, in order."""
        names = list(dict.fromkeys(names))
        if not names:
            return []
        deadline = self._deadline(timeout)
        key_list = None if keys is None else list(keys)

        def attempt(pending: list[str], deadline: Deadline) -> dict[str, Outcome]:
            body = DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(
                        resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=key_list
                    )
                    for n in pending
                ],
                include_synonyms=True,
            )
            response = self.cluster.request(None, ApiKey.DESCRIBE_CONFIGS, body, deadline=deadline)
            return {
                r.resource_name: Outcome(r.error_code, r.error_message, r)
                for r in response.results
                if r.resource_type == TOPIC_RESOURCE
            }

        outcomes = self._run(names, attempt, deadline)
        results = []
        for name in names:
            outcome = outcomes[name]
            r = outcome.payload
            if outcome.error_code or r is None:
                results.append(TopicConfigs(name, outcome.error_code, outcome.error_message))
            else:
                entries = tuple(_config_entry(c, TOPIC_RESOURCE) for c in r.configs)
                results.append(TopicConfigs(name, 0, None, tuple(sorted(entries, key=lambda e: e.name))))
        return results

    def describe_configs(
        self, topic: str, *, keys: Iterable[str] | None = None, timeout: float | None = None
    ) -> list[ConfigEntry]:
        """The configs of one topic (sorted by name); raises ``BrokerResponseError`` on error
        (UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist)."""
        [result] = self.describe_topic_configs([topic], keys=keys, timeout=timeout)
        result.raise_for_error()
        return list(result.entries)

    def describe_broker_configs(
        self, broker_id: int | None, *, timeout: float | None = None
    ) -> list[ConfigEntry]:
        """A broker's configs (sorted by name), asked of that broker; ``broker_id`` None: the
        cluster-wide dynamic defaults (resource name "", asked of any broker)."""
        return self._describe_broker_resource(BROKER_RESOURCE, broker_id, timeout)

    def describe_broker_loggers(self, broker_id: int, *, timeout: float | None = None) -> list[ConfigEntry]:
        """A broker's loggers and their levels (the BROKER_LOGGER resource, asked of that broker),
        sorted by name; the source of a level set at runtime is DYNAMIC_BROKER_LOGGER_CONFIG."""
        return self._describe_broker_resource(BROKER_LOGGER_RESOURCE, broker_id, timeout)

    def _describe_broker_resource(
        self, resource_type: int, broker_id: int | None, timeout: float | None
    ) -> list[ConfigEntry]:
        deadline = self._deadline(timeout)
        name = "" if broker_id is None else str(broker_id)
        body = DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name, configuration_keys=None
                )
            ],  # keys None: every config (an empty list asks for none)
            include_synonyms=True,
        )

        def call() -> Any:
            return self.cluster.request(broker_id, ApiKey.DESCRIBE_CONFIGS, body, deadline=deadline)

        [r] = self.cluster.retry(call, deadline=deadline).results
        if r.error_code:
            raise BrokerResponseError(r.error_code, r.error_message, context=f"broker {name or '<default>'}")
        return sorted((_config_entry(c, resource_type) for c in r.configs), key=lambda e: e.name)

    def alter_broker_loggers(
        self,
        broker_id: int,
        set: Mapping[str, str] | None = None,  # Kafka's name for the operation
        delete: Iterable[str] = (),
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> Result:
        """Set loggers' levels of one broker, or return them to their configured level (delete), at
        once and until the broker restarts (IncrementalAlterConfigs on BROKER_LOGGER, sent to that
        broker). Kafka's errors: an unknown logger or level is INVALID_CONFIG."""
        return self._alter_broker_resource(
            BROKER_LOGGER_RESOURCE, broker_id, set, delete, validate_only=validate_only, timeout=timeout
        )

    def alter_broker_configs(
        self,
        broker_id: int | None,
        set: Mapping[str, str] | None = None,  # Kafka's name for the operation
        delete: Iterable[str] = (),
        *,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> Result:
        """Set and delete dynamic broker configs (IncrementalAlterConfigs) of one broker, sent to it,
        or (``broker_id`` None) the cluster-wide defaults, sent to any broker. Kafka's errors: a
        read-only config, or a per-broker one at the default, is INVALID_REQUEST."""
        return self._alter_broker_resource(
            BROKER_RESOURCE, broker_id, set, delete, validate_only=validate_only, timeout=timeout
        )

    def _alter_broker_resource(
        self,
        resource_type: int,
        broker_id: int | None,
        set: Mapping[str, str] | None,
        delete: Iterable[str],
        *,
        validate_only: bool,
        timeout: float | None,
    ) -> Result:
        ops: list[tuple[str, AlterConfigOp, str | None]] = [
            (k, AlterConfigOp.SET, v) for k, v in (set or {}).items()
        ]
        ops += [(k, AlterConfigOp.DELETE, None) for k in delete]
        deadline = self._deadline(timeout)
        name = "" if broker_id is None else str(broker_id)
        body = IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsResource(
                    resource_type=resource_type,
                    resource_name=name,
                    configs=[
                        IncrementalAlterableConfig(name=k, config_operation=int(op), value=v)
                        for k, op, v in ops
                    ],
                )
            ],
            validate_only=validate_only,
        )

        def call() -> Any:
            return self.cluster.request(broker_id, ApiKey.INCREMENTAL_ALTER_CONFIGS, body, deadline=deadline)

        [r] = self.cluster.retry(call, deadline=deadline).responses
        return Result(name or "<default>", r.error_code, r.error_message)

    def alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,  # Kafka's name for the operation
        delete: Iterable[str] = (),
        *,
        append: Mapping[str, str] | None = None,
        subtract: Mapping[str, str] | None = None,
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> Result:
        """Set and delete (revert to default) topic configs with IncrementalAlterConfigs; other
        configs keep their values. ``append``/``subtract`` change list configs (cleanup.policy).
        Against a broker without IncrementalAlterConfigs, the current overrides are read and
        written back changed with AlterConfigs (not atomic)."""
        ops: list[tuple[str, AlterConfigOp, str | None]] = []
        ops += [(k, AlterConfigOp.SET, v) for k, v in (set or {}).items()]
        ops += [(k, AlterConfigOp.DELETE, None) for k in delete]
        ops += [(k, AlterConfigOp.APPEND, v) for k, v in (append or {}).items()]
        ops += [(k, AlterConfigOp.SUBTRACT, v) for k, v in (subtract or {}).items()]
        deadline = self._deadline(timeout)

        def attempt(pending: list[str], deadline: Deadline) -> dict[str, Outcome]:
            conn = self.cluster.any_connection(deadline=deadline)
            if conn.supports(ApiKey.INCREMENTAL_ALTER_CONFIGS):
                body: Any = IncrementalAlterConfigsRequest(
                    resources=[
                        IncrementalAlterConfigsResource(
                            resource_type=TOPIC_RESOURCE,
                            resource_name=topic,
                            configs=[
                                IncrementalAlterableConfig(name=k, config_operation=int(op), value=v)
                                for k, op, v in ops
                            ],
                        )
                    ],
                    validate_only=validate_only,
                )
                response = conn.request(
                    ApiKey.INCREMENTAL_ALTER_CONFIGS,
                    body,
                    timeout=deadline.timeout(self.config.request_timeout),
                )
            else:
                body = AlterConfigsRequest(
                    resources=[
                        AlterConfigsResource(
                            resource_type=TOPIC_RESOURCE,
                            resource_name=topic,
                            configs=[
                                AlterableConfig(name=k, value=v)
                                for k, v in self._altered_overrides(topic, ops, deadline).items()
                            ],
                        )
                    ],
                    validate_only=validate_only,
                )
                response = conn.request(
                    ApiKey.ALTER_CONFIGS, body, timeout=deadline.timeout(self.config.request_timeout)
                )
            return {r.resource_name: Outcome(r.error_code, r.error_message) for r in response.responses}

        outcome = self._run([topic], attempt, deadline)[topic]
        return Result(topic, outcome.error_code, outcome.error_message)

    def _altered_overrides(
        self, topic: str, ops: list[tuple[str, AlterConfigOp, str | None]], deadline: Deadline
    ) -> dict[str, str]:
        current = self.describe_configs(topic, timeout=deadline.remaining())
        overrides = {e.name: e.value or "" for e in current if e.source is ConfigSource.DYNAMIC_TOPIC_CONFIG}
        effective = {e.name: e.value or "" for e in current}
        for name, op, value in ops:
            if op is AlterConfigOp.SET:
                overrides[name] = value or ""
            elif op is AlterConfigOp.DELETE:
                overrides.pop(name, None)
            else:
                items = [v for v in overrides.get(name, effective.get(name, "")).split(",") if v]
                change = [v.strip() for v in (value or "").split(",") if v.strip()]
                if op is AlterConfigOp.APPEND:
                    items += [v for v in change if v not in items]
                else:
                    items = [v for v in items if v not in change]
                overrides[name] = ",".join(items)
        return overrides



def _config_entry(c: Any, resource_type: int) -> ConfigEntry:
    source_code = getattr(c, "config_source", -1)
    if source_code is None or source_code < 0:  # DescribeConfigs v0: only is_default
        if c.is_default:
            source = ConfigSource.DEFAULT_CONFIG
        elif resource_type == TOPIC_RESOURCE:
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            source = ConfigSource.STATIC_BROKER_CONFIG
    else:
        source = ConfigSource.of(source_code)
    synonyms = tuple(ConfigSynonym(s.name, s.value, ConfigSource.of(s.source)) for s in (c.synonyms or []))
    return ConfigEntry(
        name=c.name,
        value=c.value,
        source=source,
        is_default=source is ConfigSource.DEFAULT_CONFIG,
        read_only=bool(c.read_only),
        synonyms=synonyms,
        is_sensitive=bool(c.is_sensitive),
    )

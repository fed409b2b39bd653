"""Dynamic broker configs, as Kafka has them: values stored in the registry (ZooKeeper
``/config/brokers/<id>`` and ``/config/brokers/<default>``; the embedded registry's
``broker-configs.json``) that override ``server.properties`` — this broker's over the cluster-wide
defaults over the static file — read at start and re-read on every config change notification.

What a reload applies without a restart:

- the log defaults (every topic config's broker synonym: ``log.retention.ms``, ``log.segment.bytes``,
  ``compression.type``, ``min.insync.replicas``, ``message.max.bytes``, ...): every hosted log not
  overriding them gets the new value at once (retention, rolling, flushing, recompression, ...);
- ``unclean.leader.election.enable`` (the controller's fallback when the topic does not set it);
- ``log.cleaner.backoff.ms`` and ``producer.id.expiration.ms`` (read by the periodic tasks on each run);
- ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` (read by the
  replication throttles on each fetch);
- a TLS listener's key and trust material (``listener.name.<listener>.ssl.keystore.location``, ...:
  DYNAMIC_SECURITY_CONFIGS, per broker, only with the listener prefix as in Kafka): validated by
  building the new context (and Kafka's check that the certificate keeps its subject and alternative
  names), then new connections handshake with it while established ones stay up
  (kctl.broker.security.listeners); a key or trust store file rewritten in place is reloaded by an
  alteration of this broker's configs (:meth:`DynamicBrokerConfigs.reload_updated_files`).

The other dynamic configs (``listeners``, ``advertised.listeners``, ``log.cleaner.threads``) are
stored and take effect at the broker's next start; Kafka's thread-pool sizes
(``background.threads``, ``num.io.threads``, ...) and Kerberos listener configs (``sasl.kerberos.*``)
are stored and described only (kctl has one event loop and no GSSAPI). Validation of an alteration is
:func:`validate_broker_configs`, used by the config APIs (kctl.broker.config_alter).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from kctl.broker.config import BROKER_CONFIGS, PER_BROKER_CONFIGS, BrokerConfig, parse_listeners
from kctl.broker.errors import ApiError
from kctl.broker.security.config import (
    DYNAMIC_SECURITY_CONFIGS,
    is_dynamic_listener_config,
    listener_config,
)
from kctl.broker.security.listeners import ListenerSecurity, SecurityConfigError
from kctl.common.config_def import ConfigError, Dynamic
from kctl.protocol.errors import ErrorCode
from kctl.zk.znodes import ConfigEntityZNode

if TYPE_CHECKING:
    from kctl.broker.controller import Controller
    from kctl.log.manager import LogManager

log = logging.getLogger("kctl.broker.config")

DEFAULT_ENTITY = ConfigEntityZNode.DEFAULT_BROKER


def entity_of(resource_name: str) -> str:
    """The registry entity of a BROKER config resource: ``"<default>"`` for the cluster-wide
    defaults (resource name ""), else the broker id. Raises ApiError(INVALID_REQUEST)."""
    if resource_name == "":
        return DEFAULT_ENTITY
    if not resource_name.isdigit():
        raise ApiError(
            ErrorCode.INVALID_REQUEST, f"broker resource name {resource_name!r} is not a broker id"
        )
    return str(int(resource_name))


def _refuse(resource_name: str, message: str) -> ApiError:
    return ApiError(
        ErrorCode.INVALID_REQUEST,
        f"Invalid config value for resource ConfigResource(type=BROKER, name='{resource_name}'): {message}",
    )


def validate_broker_configs(
    broker: DynamicBrokerConfigs, resource_name: str, configs: Mapping[str, str]
) -> None:
    """Kafka's checks of a dynamic broker config update (``DynamicBrokerConfig.validateConfigs``):
    known names, no read-only config ("Cannot update these configs dynamically"), no per-broker
    config at the cluster-wide default, values that parse — and, for this broker or the default,
    that the resulting configuration is valid. Raises ApiError(INVALID_REQUEST)."""
    entity = entity_of(resource_name)
    prefixed = {name for name in configs if listener_config(name) is not None}
    unknown = sorted(name for name in configs if name not in BROKER_CONFIGS and name not in prefixed)
    if unknown:
        raise _refuse(resource_name, f"Unknown broker configs: {', '.join(unknown)}")
    static = sorted(
        name
        for name in configs
        if (name in prefixed and not is_dynamic_listener_config(name))
        or (name not in prefixed and BROKER_CONFIGS[name].dynamic == Dynamic.READ_ONLY)
    )
    if static:
        raise _refuse(resource_name, f"Cannot update these configs dynamically: Set({', '.join(static)})")
    unprefixed = sorted(name for name in configs if name in DYNAMIC_SECURITY_CONFIGS)
    if unprefixed:
        raise _refuse(
            resource_name,
            "These security configs can be dynamically updated only per-listener using the listener "
            f"prefix: Set({', '.join(unprefixed)})",
        )
    if entity == DEFAULT_ENTITY:
        per_broker = sorted(name for name in configs if name in PER_BROKER_CONFIGS or name in prefixed)
        if per_broker:
            raise _refuse(
                resource_name,
                "Cannot update these configs at default cluster level, broker id must be specified: "
                f"Set({', '.join(per_broker)})",
            )
    try:
        for name, value in configs.items():
            parts = listener_config(name)
            BROKER_CONFIGS.parse_value(parts[1] if parts else name, value)
            if name in ("listeners", "advertised.listeners"):
                parse_listeners(value)
        if entity in (DEFAULT_ENTITY, str(broker.broker_id)):
            trial = BrokerConfig(broker.config.properties)
            per_broker_configs = dict(configs) if entity != DEFAULT_ENTITY else broker.config.dynamic_broker
            default_configs = dict(configs) if entity == DEFAULT_ENTITY else broker.config.dynamic_default
            trial.apply_dynamic(per_broker_configs, default_configs)
            if entity == str(broker.broker_id):
                _validate_listeners_tls(broker, trial)
    except (ConfigError, ValueError) as error:
        raise _refuse(resource_name, str(error)) from None


def _tls_changed(broker: DynamicBrokerConfigs, trial: BrokerConfig) -> list[ListenerSecurity]:
    """This broker's TLS listeners (their ListenerSecurity) whose key or trust material ``trial``
    changes."""
    before, after = broker.config.effective_properties(), trial.effective_properties()
    changed = {
        parts[0]
        for name in before.keys() | after.keys()
        if (parts := listener_config(name)) is not None
        and parts[1] in DYNAMIC_SECURITY_CONFIGS
        and before.get(name) != after.get(name)
    }
    return [security for security in broker.listeners if security.tls and security.name in changed]


def _validate_listeners_tls(broker: DynamicBrokerConfigs, trial: BrokerConfig) -> None:
    """Build each changed TLS listener's new context (Kafka's validateReconfiguration); raises
    SecurityConfigError (a ValueError) with the reason."""
    properties = trial.effective_properties()
    for security in _tls_changed(broker, trial):
        security.validate_reconfiguration(properties, trial.values)


class BrokerConfigReader(Protocol):
    """What the dynamic configs read of the registry."""

    def broker_configs(self, entity: str) -> dict[str, str]: ...


def _read(registry: BrokerConfigReader, broker_id: int) -> tuple[dict[str, str], dict[str, str]]:
    return registry.broker_configs(str(broker_id)), registry.broker_configs(DEFAULT_ENTITY)


def apply_stored_configs(config: BrokerConfig, registry: BrokerConfigReader, broker_id: int) -> None:
    """At start, before anything is built from the configuration: layer the stored dynamic configs
    over the static ones (a value that no longer parses is logged and ignored)."""
    per_broker, default = _read(registry, broker_id)
    try:
        changed = config.apply_dynamic(per_broker, default)
    except ConfigError as error:
        log.error("dynamic broker configs ignored: %s", error)
        return
    if changed:
        log.info("dynamic broker configs in effect: %s", ", ".join(sorted(changed)))


class DynamicBrokerConfigs:
    """Re-reads this broker's dynamic configs from the registry and applies them (module docstring) to
    the hosted logs' defaults, the controller and the listeners' TLS material."""

    def __init__(
        self,
        config: BrokerConfig,
        registry: BrokerConfigReader,
        broker_id: int,
        *,
        logs: LogManager,
        controller: Controller,
        listeners: Iterable[ListenerSecurity],
        on_log_defaults_changed: Callable[[], None],
    ) -> None:
        self.config = config
        self.registry = registry
        self.broker_id = broker_id
        self.logs = logs
        self.controller = controller
        self.listeners = tuple(listeners)
        self._on_log_defaults_changed = on_log_defaults_changed

    def reload(self) -> set[str]:
        """Re-read the stored configs and apply what changed; the names whose value changed."""
        config = self.config
        per_broker, default = _read(self.registry, self.broker_id)
        if per_broker == config.dynamic_broker and default == config.dynamic_default:
            return set()
        try:
            changed = config.apply_dynamic(per_broker, default)
        except ConfigError as error:
            log.error("dynamic broker configs not applied: %s", error)
            return set()
        if not changed:
            return changed
        log.info("dynamic broker configs changed: %s", ", ".join(sorted(changed)))
        if self.logs.default_config != config.log_config:
            self.logs.default_config = config.log_config
            self._on_log_defaults_changed()  # every hosted log: its topic overrides over the new defaults
        if "unclean.leader.election.enable" in changed:
            self.controller.unclean_leader_election = config["unclean.leader.election.enable"]
        self._reload_tls(changed)
        return changed

    def reload_updated_files(self, resource_name: str) -> None:
        """Kafka's ``reloadUpdatedFilesWithoutConfigChange``, on an alteration of this broker's configs:
        a TLS listener whose key or trust store file was rewritten in place (same path) reloads it.
        Raises ApiError(INVALID_REQUEST), the listener unchanged, when the new file cannot be used."""
        config = self.config
        properties = config.effective_properties()
        for security in self.listeners:
            if not security.tls:
                continue
            try:
                if security.reload_changed_files(properties, config.values):
                    log.info("listener %s: reloaded its rewritten key or trust store", security.name)
            except SecurityConfigError as error:
                raise _refuse(resource_name, str(error)) from None

    def _reload_tls(self, changed: set[str]) -> None:
        """New key or trust material of this broker's TLS listeners: new handshakes use it."""
        names = {parts[0] for name in changed if (parts := listener_config(name)) is not None}
        if not names:
            return
        config = self.config
        properties = config.effective_properties()
        for security in self.listeners:
            if not security.tls or security.name not in names:
                continue
            try:
                security.reconfigure(properties, config.values)
            except SecurityConfigError as error:  # stored elsewhere, or the files changed since
                log.error("%s; the listener keeps its TLS material", error)
            else:
                log.info("listener %s: new connections use the reloaded TLS material", security.name)

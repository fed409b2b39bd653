"""The Broker: wires the log manager, the registry, the metadata cache, the hosted partitions and the
network listeners together; runs the periodic tasks (flush, retention, checkpoints, compaction); and
dispatches each decoded request to its API handler."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kctl.broker.apis.registry import handlers, supported_versions
from kctl.broker.config import BrokerConfig
from kctl.broker.connection_limits import ConnectionLimits
from kctl.broker.controller import REBALANCE, Controller
from kctl.broker.dynamic_config import DynamicBrokerConfigs, apply_stored_configs
from kctl.broker.fetch_session import FetchSessionCache
from kctl.broker.group.coordinator import GroupCoordinator
from kctl.broker.log_dir_moves import LogDirMover
from kctl.broker.loggers import BrokerLoggers
from kctl.broker.metadata_cache import MetadataCache
from kctl.broker.metadata_propagation import Expectations, MetadataPropagation
from kctl.broker.metadata_refresh import MetadataRefresher
from kctl.broker.metrics import BrokerMetrics
from kctl.broker.producer_ids import ProducerIdManager
from kctl.broker.quotas import QuotaManager
from kctl.broker.registry_retry import retry_while_unavailable
from kctl.broker.replica_manager import ReplicaManager
from kctl.broker.replica_setup import build_replica_manager
from kctl.broker.replication.channel import BrokerChannel
from kctl.broker.replication.reachability import LeaderReachability
from kctl.broker.replication.throttle import ReplicationQuota
from kctl.broker.request_log import RequestLog, combine, request_log_enabled
from kctl.broker.security.manager import BrokerSecurity
from kctl.broker.server import KafkaServer, RequestContext, RequestObserver
from kctl.broker.stall_watch import StallWatch
from kctl.broker.topics import TopicAdmin
from kctl.broker.transaction.coordinator import TransactionCoordinator
from kctl.broker.transaction.verification import TransactionVerifier
from kctl.common.fd_limit import raise_open_files_limit
from kctl.common.topic_partition import TopicPartition
from kctl.log.cleaner import clean_log, needs_cleaning
from kctl.log.clock import SYSTEM_CLOCK, Clock
from kctl.log.files import LogStorageError
from kctl.log.manager import LogManager
from kctl.protocol.registry import ApiKey
from kctl.protocol.typed import ApiRequest
from kctl.zk import Registry, open_registry
from kctl.zk.model import BrokerRegistration, RegistryError, RegistryUnavailableError, parse_endpoint
from kctl.zk.registry import (
    CONFIGS,
    CONTROLLER,
    PARTITIONS,
    SESSION_CONNECTED,
    SESSION_EXPIRED,
    SESSION_SUSPENDED,
)

R = TypeVar("R")
log = logging.getLogger("kctl.broker")

DISK_FAILURE_EXIT = 70
"""The exit status of a broker halted by a failed disk (EX_SOFTWARE: distinct from a start error)."""
UNCLEAN_RESTART_WAIT_S = 60.0
"""How long a broker back from an unclean shutdown waits for the controller before taking roles."""


class Broker:
    """One broker. Its constructor is the factory of its services: once it returns, everything its
    API handlers, periodic tasks and metrics use exists (``config``, ``broker_id``, ``clock``,
    ``supported_versions``, ``registry``, ``logs``, ``metadata``, ``propagation``, ``replicas``,
    ``controller``, ``topics``, ``producer_ids``, ``groups``, ``transactions``, ``security``,
    ``quotas``, ``dynamic_configs``, ``metrics``), built in dependency order from the configuration
    and the registry; ``start`` only starts them and listens. Handlers are typed against narrow
    Protocols of what they use (kctl.broker.handler_services), which the Broker satisfies."""

    def __init__(
        self, config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK, registry: Registry | None = None
    ) -> None:
        """Open the registry (unless given one: an embedded registry of a test, kctl.testing's
        in-process broker), recover the logs and build every service; nothing listens yet. On a
        failure what was opened is closed again."""
        raise_open_files_limit()  # before the logs are opened: a descriptor per segment
        self.config = config
        #: the bytes this leader sends to throttled followers (leader.replication.throttled.rate)
        self.leader_quota = ReplicationQuota("leader", lambda: config["leader.replication.throttled.rate"])
        self.broker_id = config.broker_id
        self.clock = clock
        #: KIP-227 incremental fetch sessions (max.incremental.fetch.session.cache.slots)
        self.fetch_sessions = FetchSessionCache(lambda: config["max.incremental.fetch.session.cache.slots"])
        #: the request path's counters; the /metrics endpoint when metrics.listener is set
        self.metrics = BrokerMetrics(config["metrics.listener"] or "")
        #: the BROKER_LOGGER config resource: logger levels changed at runtime
        self.loggers = BrokerLoggers(self.broker_id, self._on_logger_levels_changed)
        self.supported_versions = supported_versions()
        self._handlers = {key: handler.handle for key, handler in handlers().items()}
        self.servers: list[KafkaServer] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        #: registry changes -> metadata refreshes, read off the event loop (kctl.broker.metadata_refresh)
        self.refresher = MetadataRefresher(self._refresh_metadata, self._on_session_change)
        self._halting = False  # a disk failed: the process is going (_on_disk_failure)
        self._stall_watch: StallWatch | None = None  # cluster mode (kctl.broker.stall_watch)
        self._stopping = False  # set once the controlled shutdown is over: metadata is no longer followed
        self._closed = False  # _shutdown ran: logs closed, registry left
        metadata_dir = Path(config.log_dirs[0])
        metadata_dir.mkdir(parents=True, exist_ok=True)
        if registry is None:
            registry = open_registry(
                config.zookeeper_connect,
                metadata_dir,
                session_timeout_ms=config["zookeeper.session.timeout.ms"],
                connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
            )
            registry.start()
        self.registry: Registry = registry
        try:
            self._build_services(registry, metadata_dir)
        except BaseException:
            self._close_partially_built()
            raise

    def _build_services(self, registry: Registry, metadata_dir: Path) -> None:
        """The services, each from what was built before it."""
        config = self.config
        apply_stored_configs(config, registry, self.broker_id)  # dynamic broker configs over the file
        self.cluster_id = registry.cluster_id()
        self.security = BrokerSecurity(
            config.effective_properties(),  # the dynamic listener TLS material too
            config.values,
            registry.security_store,
        )
        #: each listener's TLS and SASL state (one object per listener: the dynamic configs reload it)
        self.listener_security = {
            listener.name: self.security.listener(listener.name) for listener in config.listeners
        }
        self.logs = LogManager(
            config.log_dirs,
            config.log_config,
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            clock=self.clock,
            high_watermark_follows_log_end=not self.replicated,
        )
        self.metadata = MetadataCache(registry)
        self.propagation = MetadataPropagation(self.broker_id, self.metadata, self.channel_to)
        self.replicas = self._replica_manager(registry)
        self.replicas.after_background_create = self._sync_partitions
        self.controller = Controller(
            self.broker_id,
            registry,
            unclean_leader_election=config["unclean.leader.election.enable"],
            imbalance_percentage=config["leader.imbalance.per.broker.percentage"],
        )
        self.topics = TopicAdmin(
            config,
            registry,
            self.metadata,
            self.broker_id,
            initialize_partitions=self._initialize_partitions,
            on_created=self._sync_partitions,
        )
        #: AlterReplicaLogDirs' moves of replicas between log dirs
        self.log_dir_moves = LogDirMover(self.logs, self.replicas)
        self.producer_ids = ProducerIdManager(self.broker_id, metadata_dir)
        self.groups = GroupCoordinator(self)
        self.transactions = TransactionCoordinator(self, self.channel_to)
        self.txn_verifier = TransactionVerifier(self, self.transactions, self.channel_to)
        self.replicas.on_marker = self._on_txn_marker
        self.quotas = QuotaManager(
            registry.quota_store,
            window_size_ms=config["quota.window.size.seconds"] * 1000,
            window_count=config["quota.window.num"],
        )
        self.quotas.start()  # loads the quotas and follows their changes
        self.dynamic_configs = DynamicBrokerConfigs(
            config,
            registry,
            self.broker_id,
            logs=self.logs,
            controller=self.controller,
            listeners=self.listener_security.values(),
            on_log_defaults_changed=self._sync_partitions,
        )

    def _close_partially_built(self) -> None:
        """Construction failed: close the logs (if they were opened) and the registry."""
        logs: LogManager | None = self.__dict__.get("logs")
        if logs is not None:
            with contextlib.suppress(Exception):
                logs.close()
        with contextlib.suppress(Exception):
            self.registry.close()

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, *, listen: bool = True) -> None:
        """Start the services and listen: wait out a previous run's registration, accept
        connections, register, follow the registry, and start the periodic tasks. ``listen`` False
        (kctl.testing's in-process broker): everything but the listeners; requests then come through
        ``dispatch`` only, and the broker registers its configured listener addresses."""
        self._loop = asyncio.get_running_loop()
        self.refresher.attach(self._loop)
        config = self.config
        registry = self.registry
        try:
            if self.replicated:
                self.security.check_inter_broker([listener.name for listener in config.listeners])
            # a restart right after a kill -9: the previous run's registration stays until its
            # session expires; wait for it (bounded) before listening, rather than exit
            await self._registry_step(
                f"broker {self.broker_id}: wait for a stale registration",
                lambda: registry.wait_for_stale_registration(self.broker_id),
            )
            # the cluster's metadata before the first request: with an empty cache every topic looks
            # missing, and a Produce would try to auto-create it (and answer that creation's error)
            await self._registry_step(f"broker {self.broker_id}: read the metadata", self.metadata.refresh)
            limits = ConnectionLimits.from_config(config)  # shared by the listeners
            for listener in config.listeners if listen else ():
                server = KafkaServer(
                    listener.host,
                    listener.port,
                    self.dispatch,
                    self.supported_versions,
                    max_request_size=config["socket.request.max.bytes"],
                    security=self.listener_security[listener.name],
                    credentials=self.security.credentials,
                    limits=limits,
                    name=listener.name,
                    on_request=self._request_observer(listener.name),
                )
                await server.start()
                self.servers.append(server)
            unclean = self.replicated and self.logs.lost_unsynced_writes
            if unclean:  # out of every ISR before it leads or counts as in sync (KIP-966's idea)
                await self._registry_step(
                    f"broker {self.broker_id}: announce its unclean restart",
                    lambda: registry.announce_unclean_restart(self.broker_id),
                )
            await self._register(registry)
            if unclean:
                self.metadata.refresh()  # meanwhile its clients are sent to the partitions' leaders
                await self._wait_until_unclean_restart_handled(registry)
            registry.add_listener(self.refresher.notify)
            self.metadata.refresh()
            if self.replicas.fetchers is not None:
                self.replicas.fetchers.retarget(self._fetch_address)
            self._take_offline_unloaded()
            self._sync_partitions()
            await self.metrics.start(self)
        except BaseException:
            await self._shutdown()
            raise
        self._start_periodic_tasks()
        log.info(
            "broker %d started (cluster %s, %s), listening on %s",
            self.broker_id,
            self.cluster_id,
            "ZooKeeper " + config.zookeeper_connect if config.zookeeper_connect else "embedded metadata",
            ", ".join(self.bootstrap_addresses),
        )

    async def _wait_until_unclean_restart_handled(self, registry: Registry) -> None:
        """After an unclean shutdown: take no role until the controller has taken this broker out of
        every ISR it was in (it may have lost writes it had acknowledged or replicated, and must not
        lead with a log that lacks them). Gives up after ``UNCLEAN_RESTART_WAIT_S`` with a warning
        (no controller answers: ZooKeeper or every other broker down)."""
        deadline = asyncio.get_running_loop().time() + UNCLEAN_RESTART_WAIT_S
        log.warning(
            "broker %d was not shut down cleanly: waiting for the controller to take it out of the "
            "ISRs before it takes any role",
            self.broker_id,
        )
        while self.broker_id in await self._registry_step(
            f"broker {self.broker_id}: read the unclean restart announcements", registry.unclean_restarts
        ):
            if asyncio.get_running_loop().time() > deadline:
                log.warning(
                    "broker %d: no controller handled its unclean restart within %g s; going on",
                    self.broker_id,
                    UNCLEAN_RESTART_WAIT_S,
                )
                return
            await asyncio.sleep(0.05)  # polling interval, bounded by the deadline

    # -- replication (cluster mode) ------------------------------------------------------------
    @property
    def replicated(self) -> bool:
        """Cluster mode (ZooKeeper): partitions are replicated between brokers."""
        return self.config.zookeeper_connect is not None

    def _replica_manager(self, registry: Registry) -> ReplicaManager:
        return build_replica_manager(
            self.config,
            self.logs,
            self.metadata,
            registry if self.replicated else None,
            channel_for=self.channel_to,
            on_isr_conflict=lambda: self.refresher.notify(PARTITIONS),
            on_disk_failure=self._on_disk_failure,
            leader_quota=self.leader_quota,
        )

    def _on_disk_failure(self, log_dir: Path, error: LogStorageError) -> None:
        """A log dir's disk failed (an I/O error, not a full disk), as Kafka's JBOD handling
        (KIP-112): the dir goes offline, its replicas with it (KAFKA_STORAGE_ERROR), the controller
        is told (it moves their leadership and takes this broker out of their ISR), and the other
        dirs keep serving. When the last online dir fails, halt at once rather than serve from a
        disk that lost writes: the registry session is closed first, so the controller moves the
        leaderships at once; the next start recovers the logs (and announces its unclean restart)."""
        if self._halting or log_dir in self.logs.offline_dirs:
            return
        online = [d for d in self.logs.log_dirs if d not in self.logs.offline_dirs and d != log_dir]
        if not online:
            self._halting = True
            log.critical(
                "log dir %s failed (%s) and it was the last online one: halting broker %d, as Kafka does",
                log_dir,
                error,
                self.broker_id,
            )
            with contextlib.suppress(Exception):
                self.registry.close()
            logging.shutdown()
            os._exit(DISK_FAILURE_EXIT)
        lost = self.logs.mark_offline(log_dir)
        self.replicas.take_offline(lost)
        log.error(
            "log dir %s failed (%s): offline with its %d replica(s); broker %d goes on serving %s",
            log_dir,
            error,
            len(lost),
            self.broker_id,
            ", ".join(map(str, online)),
        )
        if self.replicated:
            offline = [(tp.topic, tp.partition) for tp in self.replicas.offline_partitions]
            task = asyncio.get_running_loop().create_task(self._report_offline(offline))
            self._tasks.append(task)

    def _take_offline_unloaded(self) -> None:
        """Log dirs failed while loading: the replicas they may hold go offline before any role is
        taken, and the controller is told (it moves their leadership away, as for a dir failing
        while running)."""
        unloaded = self.replicas.take_offline_unloaded()
        if not unloaded:
            return
        log.error(
            "broker %d starts with log dir(s) %s offline: %d replica(s) whose log is in no online dir "
            "are offline",
            self.broker_id,
            ", ".join(map(str, sorted(self.logs.offline_dirs))),
            len(unloaded),
        )
        if self.replicated:
            offline = [(tp.topic, tp.partition) for tp in self.replicas.offline_partitions]
            self._tasks.append(asyncio.get_running_loop().create_task(self._report_offline(offline)))

    async def _report_offline(self, offline: list[tuple[str, int]]) -> None:
        """Tell the controller of this broker's offline replicas, until the registry takes it."""
        while True:
            try:
                await asyncio.to_thread(self.registry.report_offline_replicas, self.broker_id, offline)
                return
            except RegistryError as error:
                log.warning("could not report the offline replicas (retrying): %s", error)
                await asyncio.sleep(1.0)

    def _inter_broker_endpoint(self, broker_id: int) -> tuple[str, int, str | None] | None:
        """``broker_id``'s inter-broker endpoint (``inter.broker.listener.name``'s, or its first) as
        host, port and listener name, from its registration; None while it is not registered."""
        registration = next((b for b in self.metadata.brokers() if b.broker_id == broker_id), None)
        if registration is None:
            return None
        host, port = registration.host, registration.port
        wanted = self.security.inter_broker_listener
        listener = wanted
        for endpoint in registration.listeners:
            name, endpoint_host, endpoint_port = parse_endpoint(endpoint)
            if wanted is None or name.upper() == wanted.upper():
                host, port, listener = endpoint_host, endpoint_port, name
                break
        return host, port, listener

    def _fetch_address(self, broker_id: int) -> tuple[str, int] | None:
        endpoint = self._inter_broker_endpoint(broker_id)
        return None if endpoint is None else endpoint[:2]

    def _on_txn_marker(self, tp: TopicPartition, producer_id: int, commit: bool, offset: int) -> None:
        """A marker ended a producer's transaction on a partition this broker leads."""
        self.txn_verifier.on_marker(tp, producer_id)
        self.groups.offsets.on_txn_marker(tp, producer_id, commit, offset)

    def channel_to(self, broker_id: int) -> BrokerChannel | None:
        """A channel to ``broker_id``'s inter-broker endpoint; None while it is not registered."""
        endpoint = self._inter_broker_endpoint(broker_id)
        if endpoint is None:
            return None
        host, port, listener = endpoint
        return BrokerChannel(
            broker_id,
            host,
            port,
            request_timeout=self.config["replica.socket.timeout.ms"] / 1000,
            backoff=self.config["replica.fetch.backoff.ms"] / 1000,
            max_backoff=max(self.config["replica.fetch.backoff.ms"] / 1000, 1.0),
            security=self.security.inter_broker(listener) if listener is not None else None,
        )

    def _on_session_change(self) -> None:
        """Zombie fencing (decision 6): with the ZooKeeper session expired, stop leading at once; with
        the connection suspended, stop once it has been for the session timeout. Leading resumes
        after the registry re-registered and the states were re-read (``_refresh_metadata``)."""
        if not self.replicated:
            return
        state = self.registry.session_state()
        if state == SESSION_EXPIRED:
            self.metrics.stats.zookeeper_expires += 1
            self.replicas.fence()
        elif state == SESSION_SUSPENDED and self._loop is not None:
            self.metrics.stats.zookeeper_disconnects += 1
            self._loop.call_later(
                self.config["zookeeper.session.timeout.ms"] / 1000, self._fence_if_still_suspended
            )

    def _fence_if_still_suspended(self) -> None:
        if self.registry.session_state() != SESSION_CONNECTED:
            self.replicas.fence()

    def _on_stall(self, gap_s: float) -> None:
        """The process stood still (kctl.broker.stall_watch): fence at once, before any request that
        waited meanwhile is answered; lead again once the session proved alive and the metadata was
        read anew."""
        log.warning(
            "broker %d stood still for %.1f s: it leads and coordinates nothing until its ZooKeeper "
            "session is confirmed",
            self.broker_id,
            gap_s,
        )
        self.replicas.fence()
        if self._loop is not None:
            self._tasks.append(self._loop.create_task(self._confirm_session_after_stall()))

    async def _confirm_session_after_stall(self) -> None:
        registry = self.registry
        try:
            await asyncio.to_thread(registry.live_brokers)  # a round trip on the session
        except Exception as error:  # expired or unreachable: the session handler takes it from here
            log.info("after standing still: ZooKeeper session not confirmed (%s)", error)
            return
        if registry.session_state() == SESSION_CONNECTED:
            self.refresher.queue(PARTITIONS)  # reads the states anew, then leads again

    def _start_replication_tasks(self) -> None:
        if not self.replicated:
            return
        config = self.config
        self._stall_watch = StallWatch(config["zookeeper.session.timeout.ms"] / 3000, self._on_stall)
        self._stall_watch.start()
        lag_max_ms = config["replica.lag.time.max.ms"]
        self._every(max(lag_max_ms // 2, 1), "isr-shrink", lambda: self.replicas.maybe_shrink_isr(lag_max_ms))
        # leaders this broker follows and gets no answer from, reported to the controller
        check_ms = max(min(1000, lag_max_ms // 3), 1)
        reachability = LeaderReachability(
            self.broker_id,
            self.registry,
            lambda: self.replicas.fetchers,
            unanswered_s=lag_max_ms / 1000,
            interval_s=check_ms / 1000,
        )
        self._every(check_ms, "leader-reachability", reachability.check)
        self._every(
            config["replica.high.watermark.checkpoint.interval.ms"],
            "hw-checkpoint",
            lambda: self.logs.checkpoint_high_watermarks(),
        )

    def _request_observer(self, listener: str) -> RequestObserver | None:
        """What a listener calls once per request: the request metrics and the request log, those
        that are on (None when neither is: the request path then measures nothing)."""
        metrics = self.metrics.stats.observe_request if self.metrics.enabled else None
        request_log = RequestLog(listener).observe if request_log_enabled() else None
        return combine(metrics, request_log)

    def _on_logger_levels_changed(self) -> None:
        """A logger's level changed at runtime: the listeners observe their requests anew, with the
        request log if its logger is now enabled for DEBUG, without it if no longer."""
        for server in self.servers:
            server.set_request_observer(self._request_observer(server.name))

    async def _registry_step(self, action: str, step: Callable[[], R]) -> R:
        """A registry step of the start. With ZooKeeper: run in a thread, retried while ZooKeeper
        is unreachable (up to ``zookeeper.connection.timeout.ms`` from the first failure, as Kafka's
        ZooKeeper client waits), so a start racing a connection loss goes on once ZooKeeper answers
        instead of exiting. The embedded registry answers in place."""
        if not self.replicated:
            return step()
        timeout_s = self.config["zookeeper.connection.timeout.ms"] / 1000
        return await retry_while_unavailable(action, step, timeout_s=timeout_s)

    async def _register(self, registry: Registry) -> None:
        advertised = []
        bound = [server.port for server in self.servers]  # none when not listening
        for index, listener in enumerate(self.config.advertised_listeners):
            if index >= len(bound) and self.servers:
                break  # more advertised listeners than listeners
            port = listener.port or (bound[index] if index < len(bound) else 0)
            advertised.append((listener.name, listener.host or "127.0.0.1", port))
        if not advertised:
            raise RuntimeError("no listener to advertise")
        _name, host, port = advertised[0]
        registration = BrokerRegistration(
            broker_id=self.broker_id,
            host=host,
            port=port,
            rack=self.config["broker.rack"] or None,
            listeners=tuple(f"{n}://{h}:{p}" for n, h, p in advertised),
        )
        await self._registry_step(
            f"broker {self.broker_id}: register", lambda: registry.register_broker(registration)
        )
        self._start_controller()

    @property
    def bootstrap_addresses(self) -> list[str]:
        return [f"{server.host}:{server.port}" for server in self.servers]

    @property
    def is_controller(self) -> bool:
        return self.metadata.controller_id == self.broker_id

    async def stop(self) -> None:
        """Stop cleanly: in a cluster, first the controlled shutdown (leadership moves off this
        broker); then, as Kafka does once it is done, stop following (metadata changes are no longer
        acted on and the replica fetchers stop, so no leader takes this broker back into an ISR);
        then close listeners, flush and checkpoint every log, leave the registry."""
        await self._controlled_shutdown()
        await self._stop_following()
        await self._shutdown()

    async def _stop_following(self) -> None:
        self._stopping = True
        self.registry.remove_listener(self.refresher.notify)
        await self.refresher.stop()
        await self.replicas.stop_fetching()

    async def _shutdown(self) -> None:
        """Stop what ``start`` started and close every service (once; also after a failed start)."""
        if self._closed:
            return
        self._closed = True
        await self.refresher.stop()
        await self.metrics.stop()
        if self._stall_watch is not None:
            self._stall_watch.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.controller.stop()  # resign first, so that another broker takes over
        for server in self.servers:
            await server.stop()
        self.servers.clear()
        await self.transactions.close()
        await self.txn_verifier.close()
        await self.replicas.close()
        await self.propagation.close()
        try:
            self.logs.close()
        except OSError as error:  # a full disk: no checkpoint, no clean-shutdown marker
            log.warning("could not close the logs cleanly (%s): the next start recovers them", error)
        try:
            self.registry.unregister_broker(self.broker_id)
        except Exception:  # the session may already be gone
            log.debug("unregister failed", exc_info=True)
        self.registry.close()

    # -- metadata ------------------------------------------------------------------------------
    async def _refresh_metadata(self, *reasons: str) -> None:
        """One refresh for registry changes (kctl.broker.metadata_refresh runs them one at a time):
        the registry is read in a worker thread, the new view acted on here. A fenced broker leads
        again only when no fence came while it read (that read may predate the session loss)."""
        if self._stopping or self._closed:
            return
        try:
            if CONFIGS in reasons:
                self.dynamic_configs.reload()
            for reason in reasons:
                if reason == CONTROLLER or self.controller.active:
                    self.controller.enqueue(reason)
            fenced, fences = self.replicas.fenced, self.replicas.fences
            await asyncio.to_thread(self.metadata.refresh)
            if self._stopping or self._closed:
                return
            if self.replicas.fetchers is not None:
                self.replicas.fetchers.retarget(self._fetch_address)
            self._take_offline_unloaded()
            self._sync_partitions()
            no_fence_meanwhile = fences == self.replicas.fences
            if fenced and no_fence_meanwhile and self.registry.session_state() == SESSION_CONNECTED:
                self.replicas.unfence()
        except RegistryUnavailableError as error:  # re-read when the session is back
            log.warning("metadata refresh (%s) deferred: %s", ", ".join(reasons), error)
        except Exception:
            log.exception("metadata refresh (%s) failed", ", ".join(reasons))

    # -- controller (cluster mode: decisions 2, 8) ---------------------------------------------
    def _start_controller(self) -> None:
        """Run for controller now (a new controller reads everything and writes what is missing,
        before this broker serves), then keep processing events on the controller's task."""
        self.controller.process({CONTROLLER})
        self.controller.start()
        if self.config["auto.leader.rebalance.enable"] and self.config.zookeeper_connect:
            interval_ms = self.config["leader.imbalance.check.interval.seconds"] * 1000
            self._every(interval_ms, "leader-rebalance", self._rebalance_tick)

    def _rebalance_tick(self) -> None:
        if self.controller.active:
            self.controller.enqueue(REBALANCE)

    def _initialize_partitions(self) -> None:
        """After this broker wrote a topic or partitions: if it is the controller, write their
        first states now (else the controller does when its watch fires)."""
        if self.controller.active:
            self.controller.process({"topics"})

    async def _controlled_shutdown(self) -> None:
        """kctl's controlled shutdown (docs/architecture.md): create the ephemeral
        /kctl/controlled_shutdown/<id> and wait until the controller answers "done" with no
        replicated partition still led by this broker; an attempt lasts at most the ZooKeeper
        session timeout (a new controller is elected within it); up to
        ``controlled.shutdown.max.retries`` attempts, ``controlled.shutdown.retry.backoff.ms``
        apart; then the broker stops anyway."""
        config = self.config
        registry = self.registry
        if not config.zookeeper_connect or not config["controlled.shutdown.enable"]:
            return
        attempt_s = config["zookeeper.session.timeout.ms"] / 1000
        for attempt in range(1, max(config["controlled.shutdown.max.retries"], 1) + 1):
            try:
                await asyncio.to_thread(registry.request_controlled_shutdown, self.broker_id)
                deadline = time.monotonic() + attempt_s
                while time.monotonic() < deadline:
                    requests = await asyncio.to_thread(registry.controlled_shutdown_requests)
                    state, remaining = requests.get(self.broker_id, ("", -1))
                    if state == "done" and remaining == 0:
                        log.info("controlled shutdown of broker %d succeeded", self.broker_id)
                        return
                    if state == "done":
                        log.info("controlled shutdown: %d partition(s) still led here", remaining)
                        break
                    await asyncio.sleep(0.1)
            except RegistryError as error:
                log.warning("controlled shutdown attempt %d failed: %s", attempt, error)
            await asyncio.sleep(config["controlled.shutdown.retry.backoff.ms"] / 1000)
        log.warning("controlled shutdown of broker %d did not complete; stopping anyway", self.broker_id)

    async def await_metadata(self, expected: Expectations, deadline: float) -> dict[str, str]:
        """After an admin change made here (created, grown or deleted topics): wait until every live
        broker serves it, or the event loop time ``deadline``; returns the topics some broker still
        does not serve, each with a message (kctl.broker.metadata_propagation)."""
        return await self.propagation.wait(expected, deadline)

    def on_metadata_changed(self) -> None:
        """After an admin change made here: bring the hosted partitions in line."""
        self._sync_partitions()

    def _sync_partitions(self) -> None:
        self.replicas.sync()
        self.groups.on_partitions_changed()
        self.transactions.on_partitions_changed()

    # -- requests ------------------------------------------------------------------------------
    async def dispatch(self, context: RequestContext, request: ApiRequest[R]) -> R:
        """The answer of ``request``'s handler (None for a request answered with nothing: Produce
        acks=0), checked against the request context's authorizer; typed from the request class."""
        handler = self._handlers[context.header.api_key]
        context.authorizer = self.security.authorizer
        try:
            return await handler(self, context, request)
        except Exception:
            log.exception(
                "%s v%d from %s failed",
                ApiKey(context.header.api_key).name,
                context.header.api_version,
                context.client_host,
            )
            raise

    # -- periodic tasks ------------------------------------------------------------------------
    def _start_periodic_tasks(self) -> None:
        config = self.config
        flush = lambda: self.logs.flush_due_logs(self._on_disk_failure)  # noqa: E731
        self._every(config["log.flush.scheduler.interval.ms"], "flush", flush)
        self._every(config["log.retention.check.interval.ms"], "retention", self._run_retention)
        self._every(
            config["log.flush.offset.checkpoint.interval.ms"], "checkpoint", lambda: self.logs.checkpoint()
        )
        self._every(
            config["offsets.retention.check.interval.ms"], "offset-expiry", self.groups.offsets.expire_offsets
        )
        self._every(
            config["producer.id.expiration.check.interval.ms"], "producer-expiry", self._expire_producers
        )
        txn_abort_ms = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self._every(txn_abort_ms, "txn-abort", self.transactions.abort_timed_out)
        txn_expiry_ms = config["transaction.remove.expired.transaction.cleanup.interval.ms"]
        self._every(txn_expiry_ms, "txn-expiry", self.transactions.remove_expired)
        # the counts of repeated authorization denials, at most once a minute per key
        self._every(10_000, "authorizer-denials", self.security.authorizer.denials.flush)
        self._start_replication_tasks()
        if config["log.cleaner.enable"]:
            self._every(
                lambda: config["log.cleaner.backoff.ms"], "compaction", self._run_compaction, in_thread=True
            )

    def _every(
        self,
        interval_ms: int | Callable[[], int],
        name: str,
        work: Callable[[], Any],
        *,
        in_thread: bool = False,
    ) -> None:
        """Run ``work`` every ``interval_ms`` (a callable: read before each wait; dynamic configs)."""

        async def loop() -> None:
            while True:
                wait_ms = interval_ms() if callable(interval_ms) else interval_ms
                await asyncio.sleep(wait_ms / 1000)
                try:
                    if in_thread:
                        await asyncio.to_thread(work)
                    else:
                        work()
                except Exception:
                    log.exception("periodic task %s failed", name)

        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=f"kctl-{name}"))

    def _run_retention(self) -> None:
        started = time.monotonic()
        results = self.logs.run_retention()
        for tp, decisions in results.items():
            log.info(
                "retention deleted %d segment(s) of %s (%s) in %.0f ms",
                len(decisions),
                tp,
                ", ".join(sorted({d.reason for d in decisions})),
                (time.monotonic() - started) * 1000,
            )

    def _expire_producers(self) -> None:
        removed = self.logs.remove_expired_producers(self.config["producer.id.expiration.ms"])
        for tp, count in removed.items():
            log.info("%s: forgot %d idempotent producer(s) silent past producer.id.expiration.ms", tp, count)

    def _run_compaction(self) -> None:
        for tp, plog in self.logs.all_logs().items():
            if plog.config.compact and needs_cleaning(plog):
                result = clean_log(
                    plog, self.clock, max_decompressed_size=self.config["max.decompressed.batch.bytes"]
                )
                if result.segments_cleaned:
                    log.info(
                        "compacted %s: %d segment(s), %d -> %d bytes",
                        tp,
                        result.segments_cleaned,
                        result.bytes_before,
                        result.bytes_after,
                    )

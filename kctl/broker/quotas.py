"""Client quotas on the broker: the configured quotas (read from the quota store, reloaded on change
notifications), which quota applies to a request, the byte rates measured per client, and the
throttle time a client that exceeds its quota is given.

Kafka's model (``ClientQuotaManager`` and its default quota callback):

- **Which quota.** For a request from user U with client id C, the first configured entity in
  this order gives the quota: (U, C), (U, <default>), (U), (<default>, C), (<default>, <default>),
  (<default>), (C), (<default> client). Each quota key (``producer_byte_rate``,
  ``consumer_byte_rate``) is resolved on its own. The user is the principal's name (``ANONYMOUS``
  without authentication).
- **Whose bytes.** The rate is measured per the matched entity's names: a (U, C) or (U, <default>)
  quota measures each (user, client id) pair, a user quota everything of that user, a client-id
  quota everything of that client id, across users.
- **The rate.** Bytes are counted in ``quota.window.num`` samples of
  ``quota.window.size.seconds``; the rate is their sum over the time they span, counted as at least
  ``quota.window.num - 1`` whole windows (so a new client's first burst is measured over the full
  window, as Kafka's ``Rate`` does).
- **Throttling.** When a recorded request takes the rate above the quota, the throttle time is
  ``(rate - quota) / quota * window`` milliseconds, at most ``quota.window.num *
  quota.window.size.seconds``. The response carries it as ``throttle_time_ms`` and the connection
  takes no further request for that long (KIP-219: respond first, then mute). A throttled Fetch is
  answered without records and its bytes are not counted (as Kafka does).

``request_percentage`` and ``controller_mutation_rate`` are accepted, stored and described; kctl
does not enforce them (it has no request-time accounting)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kctl.zk.quota_store import (
    CLIENT_ID,
    DEFAULT_NAME,
    QUOTA_KEYS,
    USER,
    QuotaEntity,
    QuotaStore,
    QuotaValues,
)

if TYPE_CHECKING:
    from kctl.broker.request_context import RequestContext

log = logging.getLogger("kctl.broker.quotas")

PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"

#: (quota key, user tag, client-id tag): one measured rate ("" for a name not part of it)
SensorKey = tuple[str, str, str]


def user_of(principal: str | None) -> str:
    """The user name of a principal: ``User:alice`` -> ``alice``."""
    if not principal:
        return "ANONYMOUS"
    kind, sep, name = principal.partition(":")
    return name if sep else kind


@dataclass(slots=True)
class _Rate:
    """Per sample window, oldest first: [window start ms, bytes, throttle ms given, requests]."""

    samples: deque[list[float]] = field(default_factory=deque)
    last_used_ms: float = 0.0


class QuotaManager:
    """The broker's client quotas: ``record`` on the request path (the event loop), ``reload`` on
    change notifications (any thread)."""

    def __init__(
        self,
        store: QuotaStore,
        *,
        window_size_ms: int = 1000,
        window_count: int = 11,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.window_ms = float(window_size_ms)
        self.samples = max(window_count, 2)
        self.max_throttle_ms = int(self.window_ms * self.samples)
        self._clock = clock
        self._quotas: dict[QuotaEntity, QuotaValues] = {}
        self._rates: dict[SensorKey, _Rate] = {}
        self._lock = threading.Lock()
        self._last_prune_ms = 0.0

    def start(self) -> None:
        self.reload()
        self.store.watch(self.reload)

    def reload(self) -> None:
        try:
            quotas = self.store.all_quotas()
        except Exception:
            log.exception("cannot load the client quotas")
            return
        self._quotas = quotas  # one assignment: readers see the old or the new table
        log.debug("client quotas: %d entities", len(quotas))

    @property
    def quotas(self) -> dict[QuotaEntity, QuotaValues]:
        return self._quotas

    def _now_ms(self) -> float:
        return self._clock() * 1000.0

    # -- which quota ----------------------------------------------------------------------------
    def resolve(self, key: str, user: str, client_id: str) -> tuple[float, SensorKey] | None:
        """The quota of ``key`` for (user, client id) and the rate it is measured by; None: no quota."""
        quotas = self._quotas
        if not quotas:
            return None
        d = DEFAULT_NAME
        candidates: tuple[tuple[QuotaEntity, str, str], ...] = (
            ((user, client_id), user, client_id),
            ((user, d), user, client_id),
            ((user, None), user, ""),
            ((d, client_id), user, client_id),
            ((d, d), user, client_id),
            ((d, None), user, ""),
            ((None, client_id), "", client_id),
            ((None, d), "", client_id),
        )
        for entity, user_tag, client_tag in candidates:
            values = quotas.get(entity)
            if values is not None and key in values:
                return values[key], (key, user_tag, client_tag)
        return None

    # -- measuring ------------------------------------------------------------------------------
    def _rate(self, rate: _Rate, now: float) -> tuple[float, float]:
        """(bytes per second, window in ms) of ``rate`` at ``now``, obsolete samples dropped."""
        samples = rate.samples
        expire = now - self.samples * self.window_ms
        while samples and samples[0][0] < expire:
            samples.popleft()
        total = sum(s[1] for s in samples)
        elapsed = now - samples[0][0] if samples else 0.0
        full_windows = int(elapsed // self.window_ms)
        if full_windows < self.samples - 1:  # Kafka's Rate: at least samples - 1 whole windows
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return total * 1000.0 / elapsed, elapsed

    def record(self, key: str, principal: str | None, client_id: str | None, nbytes: int) -> int:
        """Count ``nbytes`` against the quota of ``key`` for this client; the throttle time in ms
        (0 while within the quota, or without one)."""
        if not self._quotas or nbytes <= 0:
            return 0
        found = self.resolve(key, user_of(principal), client_id or "")
        if found is None:
            return 0
        quota, sensor = found
        now = self._now_ms()
        with self._lock:
            rate = self._rates.get(sensor)
            if rate is None:
                rate = self._rates[sensor] = _Rate()
            samples = rate.samples
            if not samples or samples[-1][0] + self.window_ms <= now:
                samples.append([now, 0.0, 0.0, 0.0])
            current = samples[-1]
            current[1] += nbytes
            rate.last_used_ms = now
            value, window = self._rate(rate, now)
            self._maybe_prune(now)
            throttle = 0
            if quota > 0 and value > quota:
                throttle = int(min((value - quota) / quota * window, self.max_throttle_ms))
            current[2] += throttle  # Kafka's throttle-time sensor: every request, throttled or not
            current[3] += 1
        return throttle

    def client_metrics(self) -> list[tuple[str, str, str, float, float]]:
        """Per measured client (quota key, user, client id): its byte rate and the average throttle
        time (ms) of its requests over the sample windows — Kafka's ``byte-rate`` and
        ``throttle-time`` of the Produce and Fetch quota MBeans."""
        now = self._now_ms()
        out = []
        with self._lock:
            for (key, user, client), rate in self._rates.items():
                value, _ = self._rate(rate, now)
                requests = sum(s[3] for s in rate.samples)
                throttle = sum(s[2] for s in rate.samples) / requests if requests else 0.0
                out.append((key, user, client, value, throttle))
        return out

    def unrecord(self, key: str, principal: str | None, client_id: str | None, nbytes: int) -> None:
        """Take back ``nbytes`` just recorded (a throttled Fetch answered without records)."""
        found = self.resolve(key, user_of(principal), client_id or "") if self._quotas else None
        if found is None:
            return
        with self._lock:
            rate = self._rates.get(found[1])
            if rate is not None and rate.samples:
                rate.samples[-1][1] = max(0.0, rate.samples[-1][1] - nbytes)

    def measured_rate(self, key: str, principal: str | None, client_id: str | None) -> float | None:
        """The byte rate currently measured for this client's quota of ``key`` (None: no quota)."""
        found = self.resolve(key, user_of(principal), client_id or "")
        if found is None:
            return None
        with self._lock:
            rate = self._rates.get(found[1])
            return self._rate(rate, self._now_ms())[0] if rate is not None else 0.0

    def _maybe_prune(self, now: float) -> None:
        """Forget the rates of clients silent for the whole window (at most once a minute)."""
        if now - self._last_prune_ms < 60_000:
            return
        self._last_prune_ms = now
        horizon = now - self.samples * self.window_ms
        for sensor in [s for s, r in self._rates.items() if r.last_used_ms < horizon]:
            del self._rates[sensor]


def throttle_request(quotas: QuotaManager, key: str, context: RequestContext, nbytes: int) -> int:
    """Record a Produce's or Fetch's ``nbytes`` for its client; the throttle time (also set on the
    context, so the connection is muted after the response)."""
    session = context.session
    throttle = quotas.record(key, session.principal if session else None, context.header.client_id, nbytes)
    if throttle > context.throttle_time_ms:
        context.throttle_time_ms = throttle
    return throttle


def parse_entity(pairs: list[tuple[str, str | None]]) -> QuotaEntity:
    """(entity type, name or None for the default) pairs from a request -> a QuotaEntity; ValueError
    (INVALID_REQUEST) for an unknown or repeated type, or an empty entity."""
    user: str | None = None
    client: str | None = None
    seen: set[str] = set()
    for entity_type, name in pairs:
        if entity_type in seen:
            raise ValueError(f"duplicate entity type {entity_type!r}")
        seen.add(entity_type)
        value = DEFAULT_NAME if name is None else name
        if entity_type == USER:
            user = value
        elif entity_type == CLIENT_ID:
            client = value
        elif entity_type == "ip":
            raise ValueError("ip quotas (connection_creation_rate) are not supported by kctl")
        else:
            raise ValueError(f"unknown entity type {entity_type!r} (user or client-id)")
        if name == "":
            raise ValueError(f"empty {entity_type} name (null is the default)")
    if user is None and client is None:
        raise ValueError("the entity names no user or client-id")
    return user, client


def entity_pairs(entity: QuotaEntity) -> list[tuple[str, str | None]]:
    """A QuotaEntity as (entity type, name or None for the default) pairs, user first."""
    user, client = entity
    out: list[tuple[str, str | None]] = []
    if user is not None:
        out.append((USER, None if user == DEFAULT_NAME else user))
    if client is not None:
        out.append((CLIENT_ID, None if client == DEFAULT_NAME else client))
    return out


def check_quota_value(key: str, value: float) -> None:
    """ValueError (INVALID_REQUEST) for an unknown key or a value Kafka refuses."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise ValueError(f"unknown quota key {key!r} ({', '.join(QUOTA_KEYS)})")
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{key} must be a positive number, not {value}")
    if whole and value != int(value):
        raise ValueError(f"{key} must be a whole number of bytes per second, not {value}")

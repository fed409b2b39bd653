"""Registry steps of a broker's start that must outlive a ZooKeeper connection loss.

A broker starting while its link to ZooKeeper drops (a network fault, a ZooKeeper server killed or
paused, the ensemble electing a leader) gets ConnectionLoss from the step it was taking: waiting
for its previous run's registration to go, announcing an unclean restart, registering. Kafka's
ZooKeeper client waits for the connection to come back (up to ``zookeeper.connection.timeout.ms``)
and retries the request; `retry_while_unavailable` does the same for one step, so the broker starts
once ZooKeeper answers again instead of exiting. Only unavailability is retried: any other registry
error (the broker id held by another live broker, say) still ends the start at once. Each step it
retries must be idempotent (the steps of `Broker.start` are: an unclean-restart announcement is
recreated, a registration by this session is updated in place)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from kctl.zk.model import RegistryUnavailableError

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 1.0


async def retry_while_unavailable(action: str, step: Callable[[], T], *, timeout_s: float) -> T:
    """Run ``step`` in a thread until it returns; while it raises RegistryUnavailableError, wait
    (backing off from 0.1 s to 1 s) and try again, for at most ``timeout_s`` from the first failure,
    then raise the last error. Says once that it waits, and once that ZooKeeper answered again."""
    failing_since: float | None = None
    backoff = FIRST_BACKOFF_S
    while True:
        try:
            result = await asyncio.to_thread(step)
        except RegistryUnavailableError as error:
            now = time.monotonic()
            if failing_since is None:
                failing_since = now
                log.warning(
                    "%s: %s; retrying for up to %.0f s (zookeeper.connection.timeout.ms)",
                    action,
                    error,
                    timeout_s,
                )
            elif now - failing_since >= timeout_s:
                raise
            await asyncio.sleep(min(backoff, max(0.0, failing_since + timeout_s - now)))
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            continue
        if failing_since is not None:
            log.info("%s: ZooKeeper answered again after %.1f s", action, time.monotonic() - failing_since)
        return result

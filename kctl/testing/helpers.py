"""Small helpers for tests against a running broker or cluster, with kctl's own client (no other
dependency): kctl's tests use them, and so can users' tests of code that talks to kctl.

- `wait_for`: poll a predicate until it holds, with a deadline and a failure message that says what
  was awaited (and, optionally, what the state was at the deadline).
- `create_topic`: create a topic and wait until every partition has a leader.
- `produce`: send values to a topic and wait until the broker acknowledged every one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from kctl.client import AdminClient, NewTopic, Producer, RecordMetadata

T = TypeVar("T")

__all__ = ["WaitTimeout", "create_topic", "produce", "wait_for"]


class WaitTimeout(AssertionError):
    """`wait_for`'s deadline passed (an AssertionError: pytest reports it as a test failure)."""


def wait_for(
    predicate: Callable[[], T | None],
    what: str,
    timeout: float = 30.0,
    *,
    interval: float = 0.05,
    describe: Callable[[], str] | None = None,
) -> T:
    """Call ``predicate`` until it returns a true value, and return that value.

    ``what`` names the condition for the failure message; ``timeout`` is in seconds, and the
    predicate is called at least once, and once more after the deadline. ``interval``: seconds
    between calls. ``describe``: called at the deadline, its text added to the message (the state
    the test saw). Raises `WaitTimeout` ("timed out after 30s waiting for <what>")."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"\n{describe()}" if describe is not None else ""
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}{detail}")
        time.sleep(interval)  # polling interval, bounded by the deadline


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: Mapping[str, str] | None = None,
    *,
    timeout: float = 30.0,
) -> str:
    """Create topic ``name`` (``configs``: topic configs such as ``{"cleanup.policy": "compact"}``)
    and wait until every partition has a leader; returns the name. Raises the broker's error
    (`kctl.client.KafkaError`) if it refuses, `kctl.client.KafkaTimeoutError` at the deadline."""
    with AdminClient(bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, partitions, replication_factor, dict(configs or {}))])
        result.raise_for_error()
        admin.cluster.wait_for_topics([name], timeout=timeout)
    return name


def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes | str | None],
    *,
    keys: Sequence[bytes | str | None] | None = None,
    partition: int | Sequence[int] | None = None,
    partitions: int | None = None,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> list[RecordMetadata]:
    """Send ``values`` (str is encoded as UTF-8) to ``topic`` with kctl's producer and wait for every
    acknowledgement; returns where each record was written, in order.

    ``keys``: one per value. ``partition``: every record there, or one partition per value;
    ``partitions``: the n-th value to partition ``n % partitions``; neither: the partitioner's
    choice. ``config``: producer properties (default ``linger.ms=0``). Raises the first refused
    record's error (a `kctl.client.KafkaError`)."""
    properties = {"linger.ms": "0", **(config or {})}
    with Producer(bootstrap, properties) as producer:
        futures = []
        for n, value in enumerate(values):
            if partitions is not None:
                target: int | None = n % partitions
            elif partition is None or isinstance(partition, int):
                target = partition
            else:
                target = partition[n]
            key = keys[n] if keys is not None else None
            futures.append(producer.send(topic, value, key=key, partition=target))
        producer.flush(timeout)
        return [future.result(timeout) for future in futures]

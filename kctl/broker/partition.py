"""A partition as this broker hosts it: its log, its leadership and its high watermark, and the
fetches parked until new data arrives (long polling)."""

from __future__ import annotations

import asyncio
import contextlib

from kctl.log.log import Log
from kctl.log.naming import TopicPartition


class Partition:
    """One hosted partition. With a single replica (the only mode until replication lands) the
    high watermark follows the log end offset on every append."""

    __slots__ = ("_waiters", "isr", "leader_epoch", "leader_id", "log", "replicas", "topic_partition")

    def __init__(
        self,
        topic_partition: TopicPartition,
        log: Log,
        *,
        leader_id: int,
        leader_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
    ) -> None:
        self.topic_partition = topic_partition
        self.log = log
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.append(waiter)

    def remove_waiter(self, waiter: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)

    def notify_append(self) -> None:
        """Wake every fetch parked on this partition."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

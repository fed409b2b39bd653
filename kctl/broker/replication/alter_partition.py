"""The leader's ISR changes on their way to the registry (Kafka's AlterPartitionManager): changes
decided while a write is in flight wait and go together in the next one, so the leader of a wide
topic whose followers all caught up (or fell behind) at once makes a few registry writes, not one
per partition. ZooKeeper pipelines each batch (``TopicStore.alter_partition_states``); each change
is stored or refused on its own.

An expansion is dropped for a broker that asked for a controlled shutdown (read from the registry
once per batch: the metadata cache may not have heard of the request yet). The owner applies what
was stored (``on_stored``) and re-reads the metadata when a change lost a race (``on_conflict``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kctl.broker.partition import Partition
from kctl.zk.model import (
    PartitionState,
    PartitionStateConflictError,
    PartitionStateUpdate,
    RegistryError,
)

log = logging.getLogger("kctl.broker.replica_manager")


class IsrRegistry(Protocol):
    """What the ISR writes use of the registry."""

    def alter_partition_states(
        self, updates: list[PartitionStateUpdate]
    ) -> dict[tuple[str, int], PartitionState | RegistryError]: ...

    def controlled_shutdown_requests(self) -> dict[int, tuple[str, int]]: ...


@dataclass(frozen=True)
class IsrChange:
    """One leader's decided ISR change: the partition, the state to write, the partition epoch it
    was decided on, the ISR before it and why."""

    partition: Partition
    state: PartitionState
    expected_partition_epoch: int
    previous_isr: tuple[int, ...]
    why: str

    @property
    def added(self) -> set[int]:
        return set(self.state.isr) - set(self.previous_isr)


class AlterPartitionManager:
    """Batches ISR changes into registry writes; at most one write is in flight."""

    def __init__(
        self,
        registry: IsrRegistry,
        *,
        on_stored: Callable[[IsrChange, PartitionState], None],
        on_conflict: Callable[[], None] | None = None,
    ) -> None:
        self._registry = registry
        self._on_stored = on_stored
        self._on_conflict = on_conflict
        self._pending: list[IsrChange] = []
        self._writer: asyncio.Task[None] | None = None

    @property
    def in_flight(self) -> bool:
        return self._writer is not None

    def submit(self, change: IsrChange) -> None:
        """Queue ``change`` (its partition is marked ``isr_update_pending`` by the caller) for the
        next write."""
        self._pending.append(change)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_pending())

    async def close(self) -> None:
        writer = self._writer
        if writer is not None:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        for change in self._pending:
            _settle(change)
        self._pending.clear()

    async def _write_pending(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                await self._write(batch)
        finally:
            self._writer = None

    async def _write(self, batch: list[IsrChange]) -> None:
        stored: dict[tuple[str, int], PartitionState | RegistryError] = {}
        written: list[IsrChange] = []
        try:
            leaving: set[int] = set()
            if any(change.added for change in batch):
                requests = await asyncio.to_thread(self._registry.controlled_shutdown_requests)
                leaving = set(requests)
            updates = []
            for change in batch:
                state = _without_shutting_down(leaving, change.state, change.added)
                if state is None:
                    continue  # only leaving brokers were to join: nothing to write
                written.append(change)
                tp = change.partition.topic_partition
                updates.append(
                    PartitionStateUpdate(tp.topic, tp.partition, state, change.expected_partition_epoch)
                )
            if updates:
                stored = await asyncio.to_thread(self._registry.alter_partition_states, updates)
        except RegistryError as error:
            log.warning("could not write the ISR of %d partition(s): %s", len(batch), error)
            written = []
        finally:
            for change in batch:
                _settle(change)
        conflicts = 0
        for change in written:
            tp = change.partition.topic_partition
            outcome = stored.get((tp.topic, tp.partition))
            if isinstance(outcome, PartitionState):
                self._on_stored(change, outcome)
            elif isinstance(outcome, PartitionStateConflictError):
                conflicts += 1
                log.info("%s: ISR change (%s) lost a race: re-reading the state", tp, change.why)
            elif outcome is not None:
                log.warning("%s: could not write the ISR (%s): %s", tp, change.why, outcome)
        if conflicts and self._on_conflict is not None:
            self._on_conflict()


def _settle(change: IsrChange) -> None:
    """The change's write is over (stored or not): the partition may decide the next one."""
    change.partition.isr_update_pending = False
    change.partition.isr_pending_additions = ()
    change.partition.state_changed()


def _without_shutting_down(
    leaving_brokers: set[int], state: PartitionState, added: set[int]
) -> PartitionState | None:
    """``state`` without the ``added`` brokers that asked for a controlled shutdown; None when
    nothing is left to add."""
    leaving = added & leaving_brokers
    if not leaving:
        return state
    if leaving == added:
        return None
    isr = tuple(r for r in state.isr if r not in leaving)
    return dataclasses.replace(state, isr=isr)

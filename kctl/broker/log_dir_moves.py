"""Moves of partitions between this broker's log directories (AlterReplicaLogDirs), run in the
background while the partitions keep serving: two copy passes in a thread (the bulk, then what was
appended meanwhile), then, on the event loop so that no append interleaves, the swap
(``LogManager.complete_move``: close, last delta, rename, reopen) and the hosted ``Partition`` takes
the new log. DescribeLogDirs shows a move in progress as a future replica in its destination."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kctl.common.topic_partition import TopicPartition
from kctl.log.dir_move import LogMove

if TYPE_CHECKING:
    from kctl.broker.replica_manager import ReplicaManager
    from kctl.log.manager import LogManager

log = logging.getLogger("kctl.broker.log_dir_moves")

COPY_PASSES = 2


@dataclass
class MoveProgress:
    """What DescribeLogDirs shows of a move: the future replica in ``destination``."""

    topic_partition: TopicPartition
    destination: Path
    size: int
    offset_lag: int


class LogDirMover:
    """The moves of one broker, at most one per partition (a new destination replaces the old)."""

    def __init__(self, logs: LogManager, replicas: ReplicaManager) -> None:
        self.logs = logs
        self.replicas = replicas
        self._moves: dict[TopicPartition, tuple[LogMove, asyncio.Task[None]]] = {}

    def start(self, tp: TopicPartition, destination: str) -> None:
        """Move ``tp`` to ``destination`` (LogDirNotFoundError, KeyError for no such replica)."""
        logs = self.logs
        current = self._moves.get(tp)
        if current is not None:
            if current[0].destination == Path(destination).resolve():
                return
            current[1].cancel()
            self._moves.pop(tp, None)
        move = logs.begin_move(tp, destination)
        if move is None:
            return
        task = asyncio.get_running_loop().create_task(self._run(move), name=f"kctl-move-{tp}")
        self._moves[tp] = (move, task)

    async def _run(self, move: LogMove) -> None:
        logs = self.logs
        tp = move.topic_partition
        try:
            for _ in range(COPY_PASSES):
                await asyncio.to_thread(logs.copy_for_move, move)
            old = logs.get_log(tp)
            try:
                new = logs.complete_move(move)
            finally:
                partition = self.replicas.partitions.get(tp)
                reopened = logs.get_log(tp)
                if partition is not None and reopened is not None and partition.log is old:
                    partition.log = reopened
                    partition.state_changed()
            log.info("moved %s to %s (%s)", tp, move.destination, new.directory)
        except asyncio.CancelledError:
            logs.abandon_move(move)
            raise
        except Exception:
            log.exception("moving %s to %s failed", tp, move.destination)
            logs.abandon_move(move)
        finally:
            entry = self._moves.get(tp)
            if entry is not None and entry[0] is move:
                del self._moves[tp]

    def in_progress(self) -> list[MoveProgress]:
        out = []
        for tp, (move, _task) in self._moves.items():
            plog = self.logs.get_log(tp)
            end = plog.log_end_offset if plog is not None else 0
            start = plog.log_start_offset if plog is not None else 0
            reached = move.copied_end_offset if move.copied_end_offset >= 0 else start
            out.append(MoveProgress(tp, move.destination, move.copied_bytes, max(0, end - reached)))
        return out

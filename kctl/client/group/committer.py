"""A group member's offsets: commit (synchronous, or asynchronous with callbacks run from ``poll``),
auto commit every ``auto.commit.interval.ms`` and before partitions are revoked, and fetching the
group's committed offsets.

``OffsetCommitter`` is the membership's collaborator for this, built with the cluster (deadlines,
retries), the group's settings, the ``CoordinatorChannel``, the ``Member`` and the consumer's
positions. A subscribed member commits only as a member of the current generation (as Kafka's
consumer); a commit refused because the group rebalanced marks the member for a rejoin (or as
expelled) and raises ``CommitFailedError``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from kctl.client.cluster import ClusterClient
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group.coordinator import (
    COORDINATOR_ERRORS,
    CoordinatorChannel,
    OffsetAndMetadata,
    as_offset,
    offset_commit_request,
    offset_commit_results,
    offset_fetch_request,
    offset_fetch_results,
)
from kctl.client.group.member import Member
from kctl.client.group.state import (
    MEMBERSHIP_ERRORS,
    CommitFailedError,
    MemberState,
    PositionsProvider,
    in_group,
)
from kctl.client.group_config import GroupConfig
from kctl.common.topic_partition import TopicPartition
from kctl.protocol import ApiKey, ErrorCode

log = logging.getLogger("kctl.client.group.membership")


CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
"""``callback(offsets, error)`` of an asynchronous commit (error None: committed)."""


class OffsetCommitter:
    """Commits and committed-offset lookups of one member (see the module docstring).

    ``positions()``: the consumer's positions (for auto commit and ``commit()`` without offsets);
    ``report(error)``: where an exception raised by a commit callback goes (``poll`` raises it)."""

    def __init__(
        self,
        cluster: ClusterClient,
        config: GroupConfig,
        channel: CoordinatorChannel,
        member: Member,
        positions: PositionsProvider | None = None,
        *,
        report: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.channel = channel
        self.member = member
        self.group_id = member.group_id
        self.positions = positions
        self._report = report
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000
        self._commit_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._completed_commits: list[tuple[CommitCallback, Any, BaseException | None]] = []
        self._pending_commits: set[concurrent.futures.Future[Any]] = set()

    def commit_before_revoke(self, partitions: Collection[TopicPartition] | None = None) -> None:
        """With auto commit: commit the positions of ``partitions`` (default: the assignment) before
        they are given up; a failure is logged."""
        if not self.config.enable_auto_commit or self.positions is None:
            return
        try:
            offsets = self._positions(partitions)
            if offsets:
                self.commit(offsets)
        except KafkaError as error:
            log.warning("group %s: commit before revoking failed: %s", self.group_id, error)

    def _positions(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if self.positions is None:
            return {}
        # subscribed: the partitions the group gave us; assigned by hand: every position given
        wanted = (
            frozenset(partitions)
            if partitions is not None
            else (self.member.assignment if self.member.subscribed else None)
        )
        return {
            TopicPartition(*tp): as_offset(value)
            for tp, value in self.positions().items()
            if (wanted is None or TopicPartition(*tp) in wanted) and as_offset(value).offset >= 0
        }

    def maybe_auto_commit(self) -> None:
        """Commit the positions (asynchronously) when ``auto.commit.interval.ms`` passed since the
        last time, unless a rebalance is under way."""
        if not self.config.enable_auto_commit or self.positions is None:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000
        member = self.member
        if member.subscribed and (member.state is not MemberState.STABLE or member.rejoin_reason is not None):
            return
        offsets = self._positions()
        if offsets:
            self.commit(offsets, asynchronous=True, callback=self._auto_commit_done)

    def _auto_commit_done(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], error: BaseException | None
    ) -> None:
        if error is not None:
            log.warning("group %s: auto commit failed: %s", self.group_id, error)

    def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
        *,
        asynchronous: bool = False,
        callback: CommitCallback | None = None,
        timeout: float | None = None,
    ) -> (
        concurrent.futures.Future[dict[TopicPartition, OffsetAndMetadata]]
        | dict[TopicPartition, OffsetAndMetadata]
    ):
        """Commit offsets (OffsetCommit, with this member's generation; generation -1 when it is not
        a member). ``offsets``: partition -> the offset of the next record to read (or an
        ``OffsetAndMetadata``); None commits ``positions()`` of the assigned partitions.

        Synchronous: returns the offsets committed, or raises ``CommitFailedError`` (after a
        rebalance took the partitions away, the commit fails and the member rejoins). Asynchronous:
        returns a Future; ``callback(offsets, error)`` runs in the thread that calls ``poll`` or
        ``close``."""
        values = (
            self._positions()
            if offsets is None
            else {TopicPartition(*tp): as_offset(v) for tp, v in offsets.items()}
        )
        if not asynchronous:
            return self._commit_sync(values, timeout)
        if self._commit_pool is None:
            self._commit_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"kctl-group-commit-{self.group_id}"
            )
        future = self._commit_pool.submit(self._commit_sync, values, timeout)
        self._pending_commits.add(future)

        def done(f: concurrent.futures.Future[Any]) -> None:
            self._pending_commits.discard(f)
            if callback is not None:
                error = f.exception()
                with self.member.lock:
                    self._completed_commits.append((callback, values, error))

        future.add_done_callback(done)
        return future

    def run_callbacks(self) -> None:
        """Run the callbacks of the asynchronous commits that completed, in the caller's thread; an
        exception a callback raises is logged and handed to ``report``, not raised."""
        with self.member.lock:
            completed, self._completed_commits = self._completed_commits, []
        for callback, values, error in completed:
            try:
                callback(values, error)
            except Exception as exc:
                log.error("group %s: commit callback raised %r", self.group_id, exc)
                if self._report is not None:
                    self._report(exc)

    def _commit_sync(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout: float | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if not offsets:
            return {}
        deadline = self.cluster.deadline(timeout)
        attempt = 0
        while True:
            member = self.member
            with member.lock:
                if member.subscribed and (
                    member.state is not MemberState.STABLE or member.generation_id < 0 or member.lost_reason
                ):
                    # as Kafka's consumer: a subscribed member commits only as a member of a generation
                    what = (
                        "a rebalance is under way"
                        if member.state is MemberState.JOINING and not member.lost_reason
                        else "the consumer is not a member of the group now (it was removed or left)"
                    )
                    raise CommitFailedError(f"group {self.group_id!r}: cannot commit: {what}")
                joined = member.state is not MemberState.UNJOINED and member.generation_id >= 0
                generation = member.generation_id if joined else -1
                member_id = member.member_id if joined else ""
            instance_id = self.config.group_instance_id if joined else None
            build = functools.partial(
                offset_commit_request,
                group_id=self.group_id,
                offsets=offsets,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance_id,
            )
            try:
                response = self.channel.request(
                    "offsets",
                    ApiKey.OFFSET_COMMIT,
                    build,
                    deadline=deadline,
                    timeout=deadline.timeout(self.config.request_timeout),
                ).body
            except KafkaError as error:
                if not error.retriable or deadline.expired:
                    raise CommitFailedError(in_group(self.group_id, error, "commit failed")) from error
                errors: dict[TopicPartition, BrokerResponseError] = {}
            else:
                codes = offset_commit_results(response)
                errors = {
                    tp: BrokerResponseError(code, context=str(tp)) for tp, code in codes.items() if code
                }
                missing = [tp for tp in offsets if tp not in codes]
                for tp in missing:
                    errors[tp] = BrokerResponseError(
                        ErrorCode.UNKNOWN_SERVER_ERROR, "not in the response", context=str(tp)
                    )
                if not errors:
                    return offsets
                codes_seen = {e.code for e in errors.values()}
                if codes_seen & COORDINATOR_ERRORS:
                    self.channel.invalidate()
                if codes_seen & MEMBERSHIP_ERRORS or ErrorCode.FENCED_INSTANCE_ID in codes_seen:
                    with member.lock:
                        expelled = bool(
                            codes_seen & {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION}
                        )
                        if expelled and joined and member.is_generation(member_id, generation):
                            member.lost_reason = f"commit answered {next(iter(errors.values())).name}"
                        member.request_rejoin("a commit found the group rebalancing")
                    first = next(iter(errors.values()))
                    raise CommitFailedError(
                        f"group {self.group_id!r}: commit failed: {first.name}: the group rebalanced and "
                        "the partitions may be someone else's now",
                        errors,
                    )
                if not all(e.retriable for e in errors.values()) or deadline.expired:
                    first = next(iter(errors.values()))
                    raise CommitFailedError(in_group(self.group_id, first, "commit failed"), errors)
                offsets = {tp: offsets[tp] for tp in errors}  # retry only what failed
            attempt += 1
            wait = min(
                self.config.retry_backoff_ms / 1000 * 2**attempt, self.config.retry_backoff_max_ms / 1000
            )
            if deadline.remaining() <= wait:
                raise CommitFailedError(f"group {self.group_id!r}: commit failed: out of time", errors)
            time.sleep(wait)

    def committed(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (default: the assignment); None where
        nothing is committed. ``partitions=None`` with no assignment: every committed offset."""
        wanted = (
            list(dict.fromkeys(TopicPartition(*tp) for tp in partitions)) if partitions is not None else None
        )
        if wanted is None and self.member.assignment:
            wanted = sorted(self.member.assignment)
        if wanted == []:
            return {}
        deadline = self.cluster.deadline(timeout)

        def attempt() -> dict[TopicPartition, OffsetAndMetadata | None]:
            reply = self.channel.request(
                "offsets",
                ApiKey.OFFSET_FETCH,
                lambda version: offset_fetch_request(version, self.group_id, wanted),
                deadline=deadline,
                timeout=deadline.timeout(self.config.request_timeout),
                min_version=None if wanted is not None else 2,
            )
            fetched = offset_fetch_results(reply.version, reply.body, self.group_id)
            if fetched.error_code:
                if fetched.error_code in COORDINATOR_ERRORS:
                    self.channel.invalidate()
                raise BrokerResponseError(
                    fetched.error_code, context=f"OffsetFetch of group {self.group_id!r}"
                )
            for tp, code in fetched.errors.items():
                if code in COORDINATOR_ERRORS:
                    self.channel.invalidate()
                raise BrokerResponseError(code, context=f"OffsetFetch of {tp}")
            if wanted is None:
                return dict(sorted(fetched.offsets.items()))
            return {tp: fetched.offsets.get(tp) for tp in wanted}

        return self.cluster.retry(attempt, deadline=deadline, description="OffsetFetch")

    def wait_pending(self, timeout: float) -> None:
        """Wait for the asynchronous commits under way (at most ``timeout`` seconds each)."""
        for future in list(self._pending_commits):
            with contextlib.suppress(Exception):
                future.result(timeout=timeout)

    def close(self) -> None:
        """Stop the asynchronous commits' thread (commits not started are dropped)."""
        if self._commit_pool is not None:
            self._commit_pool.shutdown(wait=False, cancel_futures=True)

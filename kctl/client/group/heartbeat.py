"""The heartbeat thread of a group member: Heartbeat every ``heartbeat.interval.ms`` (also while a
rebalance is under way, which keeps the member's session alive), noticing rebalances and
expulsions from its answers, and leaving the group when ``poll`` has not been called for
``max.poll.interval.ms``.

``HeartbeatMixin`` is one part of ``GroupMembership``; what it learns it records in the member's
state (a rejoin or a loss to handle at the next ``poll``, or a fatal error ``poll`` raises).
"""

from __future__ import annotations

import logging
import threading
import time

from kctl.client.cluster import Deadline
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group.coordinator import COORDINATOR_ERRORS, CoordinatorChannel
from kctl.client.group.state import GroupMembershipError, MemberState, in_group
from kctl.client.group_config import GroupConfig
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.heartbeat import HeartbeatRequest

log = logging.getLogger("kctl.client.group.membership")


class HeartbeatMixin:
    """The heartbeat thread of a ``GroupMembership`` (see the module docstring)."""

    group_id: str
    config: GroupConfig
    channel: CoordinatorChannel
    _lock: threading.RLock
    _state: MemberState
    _member_id: str
    _generation: int
    _lost_reason: str | None
    _fatal: KafkaError | None
    _last_poll: float
    _closing: threading.Event
    _heartbeat_wakeup: threading.Event
    _heartbeat_thread: threading.Thread | None

    def _request_rejoin(self, reason: str) -> None:
        """Provided by ``GroupMembership``."""
        raise NotImplementedError

    def _leave(self, member_id: str, purpose: str, reason: str) -> None:
        """Provided by ``GroupMembership``."""
        raise NotImplementedError

    def _ensure_heartbeat_thread(self) -> None:
        if self._heartbeat_thread is None:
            self._heartbeat_thread = threading.Thread(
                target=self._heartbeat_loop, name=f"kctl-group-heartbeat-{self.group_id}", daemon=True
            )
            self._heartbeat_thread.start()

    def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        while not self._closing.is_set():
            self._heartbeat_wakeup.wait(interval)
            self._heartbeat_wakeup.clear()
            if self._closing.is_set():
                return
            try:
                wait = self._heartbeat_once()
            except Exception:  # never let the thread die silently
                log.exception("group %s: heartbeat failed", self.group_id)
                wait = interval
            if wait is not None and wait < interval:
                if self._closing.wait(wait):
                    return
                self._heartbeat_wakeup.set()

    def _heartbeat_once(self) -> float | None:
        """One heartbeat; returns a shorter wait before the next when it should come sooner."""
        with self._lock:
            state, member_id, generation = self._state, self._member_id, self._generation
        if state is MemberState.UNJOINED or not member_id or generation < 0:
            return None
        max_poll = self.config.max_poll_interval_ms / 1000
        if state is MemberState.STABLE and time.monotonic() - self._last_poll > max_poll:
            self._poll_timeout_expired(max_poll)
            return None
        instance_id = self.config.group_instance_id
        deadline = Deadline(self.config.session_timeout_ms / 1000)
        try:
            response = self.channel.request(
                "heartbeat",
                ApiKey.HEARTBEAT,
                lambda version: HeartbeatRequest(
                    group_id=self.group_id,
                    generation_id=generation,
                    member_id=member_id,
                    group_instance_id=instance_id,
                ),
                deadline=deadline,
                timeout=min(self.config.request_timeout, self.config.session_timeout_ms / 1000),
            ).body
        except KafkaError as error:
            log.info("group %s: heartbeat: %s", self.group_id, error)
            if not error.retriable:
                self._fail(error)
            return self.config.retry_backoff_ms / 1000
        code = response.error_code
        if not code:
            return None
        with self._lock:
            if (self._member_id, self._generation) != (member_id, generation):
                return None  # a join changed the membership while the heartbeat was out
            if code in COORDINATOR_ERRORS:
                self.channel.invalidate()
                return self.config.retry_backoff_ms / 1000
            if self._state is not MemberState.STABLE:
                return None  # heartbeats during a join only keep the session alive
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self._request_rejoin("the group is rebalancing")
            elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self._member_id = ""
                self._generation = -1
                self._lost_reason = f"heartbeat answered {BrokerResponseError(code).name}"
            else:
                self._fail(BrokerResponseError(code, context=f"Heartbeat of group {self.group_id!r}"))
        return None

    def _fail(self, error: KafkaError) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = (
                    error
                    if isinstance(error, GroupMembershipError)
                    else GroupMembershipError(in_group(self.group_id, error))
                )

    def _poll_timeout_expired(self, max_poll: float) -> None:
        log.warning(
            "group %s: no poll for more than max.poll.interval.ms (%gs); leaving the group",
            self.group_id,
            max_poll,
        )
        with self._lock:
            member_id = self._member_id
            self._lost_reason = "max.poll.interval.ms passed without a poll"
            self._generation = -1
            if not self.config.group_instance_id:
                self._member_id = ""
        if not self.config.group_instance_id:
            self._leave(member_id, "heartbeat", "consumer poll timeout has expired")


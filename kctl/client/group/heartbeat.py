"""The heartbeat thread of a group member: Heartbeat every ``heartbeat.interval.ms`` (also while a
rebalance is under way, which keeps the member's session alive), noticing rebalances and
expulsions from its answers, and leaving the group when ``poll`` has not been called for
``max.poll.interval.ms``.

``Heartbeat`` is the membership's collaborator for this, built with the group's settings, the
``CoordinatorChannel``, the ``Member`` and a way to leave the group (``GroupJoiner.leave``). What it
learns it records in the member (a rejoin or a loss to handle at the next ``poll``, or a fatal
error ``poll`` raises); ``beat`` is one heartbeat, without the thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kctl.client.cluster import Deadline
from kctl.client.errors import BrokerResponseError, KafkaError
from kctl.client.group.coordinator import COORDINATOR_ERRORS, CoordinatorChannel
from kctl.client.group.member import Member
from kctl.client.group.state import GroupMembershipError, MemberState, in_group
from kctl.client.group_config import GroupConfig
from kctl.protocol import ApiKey, ErrorCode
from kctl.protocol.messages.heartbeat import HeartbeatRequest

log = logging.getLogger("kctl.client.group.membership")


Leave = Callable[[str, str, str], None]
"""Send LeaveGroup: ``leave(member_id, purpose, reason)`` (``GroupJoiner.leave``)."""


class Heartbeat:
    """The heartbeat thread of one member (see the module docstring): ``start`` it once the member
    subscribes, tell it of every ``poll`` (``polled``), ``wake`` it when a join starts, ``stop``
    and ``join`` it on close."""

    def __init__(
        self, config: GroupConfig, channel: CoordinatorChannel, member: Member, leave: Leave
    ) -> None:
        self.config = config
        self.channel = channel
        self.member = member
        self.group_id = member.group_id
        self._leave = leave
        self._last_poll = time.monotonic()
        self._wakeup = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    def polled(self) -> None:
        """The consumer polled now (``max.poll.interval.ms`` counts from here)."""
        self._last_poll = time.monotonic()

    def start(self) -> None:
        """Start the thread, unless it runs already."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name=f"kctl-group-heartbeat-{self.group_id}", daemon=True
            )
            self._thread.start()

    def wake(self) -> None:
        """Heartbeat now rather than at the end of the interval."""
        self._wakeup.set()

    def stop(self) -> None:
        """Tell the thread to end (``join`` waits for it)."""
        self._closing.set()
        self._wakeup.set()

    def join(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds for the thread to end (not when called from it)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)

    def _loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        while not self._closing.is_set():
            self._wakeup.wait(interval)
            self._wakeup.clear()
            if self._closing.is_set():
                return
            try:
                wait = self.beat()
            except Exception:  # never let the thread die silently
                log.exception("group %s: heartbeat failed", self.group_id)
                wait = interval
            if wait is not None and wait < interval:
                if self._closing.wait(wait):
                    return
                self._wakeup.set()

    def beat(self) -> float | None:
        """One heartbeat; returns a shorter wait before the next when it should come sooner."""
        state, member_id, generation = self.member.generation()
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
        member = self.member
        with member.lock:
            if not member.is_generation(member_id, generation):
                return None  # a join changed the membership while the heartbeat was out
            if code in COORDINATOR_ERRORS:
                self.channel.invalidate()
                return self.config.retry_backoff_ms / 1000
            if member.state is not MemberState.STABLE:
                return None  # heartbeats during a join only keep the session alive
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                member.request_rejoin("the group is rebalancing")
            elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    member.member_id = ""
                member.generation_id = -1
                member.lost_reason = f"heartbeat answered {BrokerResponseError(code).name}"
            else:
                self._fail(BrokerResponseError(code, context=f"Heartbeat of group {self.group_id!r}"))
        return None

    def _fail(self, error: KafkaError) -> None:
        with self.member.lock:
            if self.member.fatal is None:
                self.member.fatal = (
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
        member = self.member
        with member.lock:
            member_id = member.member_id
            member.lost_reason = "max.poll.interval.ms passed without a poll"
            member.generation_id = -1
            if not self.config.group_instance_id:
                member.member_id = ""
        if not self.config.group_instance_id:
            self._leave(member_id, "heartbeat", "consumer poll timeout has expired")


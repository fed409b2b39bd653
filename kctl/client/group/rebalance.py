"""The member's side of a rebalance: what happens to the partitions it holds. Before a join, an eager
member (``range``, ``roundrobin``, ``sticky``) commits and gives up all of them, a cooperative one
(``cooperative-sticky``) only those of topics it no longer subscribes to; after a join it gives up
what moves elsewhere (and rejoins for the rest) and takes what was added; when it was thrown out it
loses them without a commit. The application hears of each change through ``on_revoke``,
``on_assign`` and ``on_lost`` (default: ``on_revoke``), called in the polling thread.

``Rebalancer`` is the membership's collaborator for this, built with the ``Member`` (whose
``assignment`` it changes), the ``OffsetCommitter`` (the commit before revoking), the
``TopicSubscription``, the rebalance protocol and the callbacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kctl.client.group.assignors import RebalanceProtocol
from kctl.client.group.committer import OffsetCommitter
from kctl.client.group.member import Member
from kctl.client.group.state import Callback, JoinResult, MemberState, Partitions, show_partitions
from kctl.client.group.subscription import TopicSubscription

log = logging.getLogger("kctl.client.group.membership")


class Rebalancer:
    """Changes to one member's assignment, and the callbacks that announce them (see the module
    docstring). ``report(error)``: where an exception raised by a callback goes (``poll`` raises it
    once the member's state is right). Each method returns whether the assignment changed."""

    def __init__(
        self,
        member: Member,
        committer: OffsetCommitter,
        subscription: TopicSubscription,
        protocol: RebalanceProtocol,
        *,
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
        report: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.member = member
        self.committer = committer
        self.subscription = subscription
        self.protocol = protocol
        self.group_id = member.group_id
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.on_lost = on_lost
        self._report = report

    def _invoke(self, callback: Callback | None, partitions: Partitions, what: str) -> None:
        if callback is None:
            return
        try:
            callback(partitions)
        except Exception as error:  # a user callback: report it from poll, after the state is right
            log.error("group %s: %s callback raised %r", self.group_id, what, error)
            if self._report is not None:
                self._report(error)

    def prepare_join(self) -> bool:
        """Before joining: eager members commit and give up everything; cooperative members give up
        only partitions of topics they no longer subscribe to."""
        member = self.member
        if not member.assignment:
            return False
        if self.protocol is RebalanceProtocol.EAGER:
            self.committer.commit_before_revoke()
            revoked = member.assignment
            with member.lock:
                member.previous = (revoked, member.generation_id)
                member.assignment = frozenset()
            self._invoke(self.on_revoke, revoked, "on_revoke")
            return True
        gone = frozenset(tp for tp in member.assignment if tp.topic not in self.subscription.topics)
        if not gone:
            return False
        self.committer.commit_before_revoke(gone)
        with member.lock:
            member.assignment = member.assignment - gone
        self._invoke(self.on_revoke, gone, "on_revoke")
        return True

    def lose_partitions(self) -> bool:
        """The member was thrown out (``member.lost_reason``): its partitions are lost, without a
        commit (``on_lost``), and it joins again."""
        member = self.member
        with member.lock:
            reason, member.lost_reason = member.lost_reason, None
            lost = member.assignment
            member.assignment = frozenset()
            member.previous = (frozenset(), -1)
            member.state = MemberState.UNJOINED
            member.request_rejoin(f"lost the membership: {reason}")
        if not lost:
            return False
        log.warning("group %s: lost partitions %s: %s", self.group_id, show_partitions(lost), reason)
        self._invoke(self.on_lost or self.on_revoke, lost, "on_lost")
        return True

    def complete_join(self, result: JoinResult) -> bool:
        """A join round succeeded: enter its generation, give up what moved elsewhere (cooperative:
        then rejoin), take the new assignment (``on_assign`` of what was added)."""
        member = self.member
        new = result.assignment
        old = member.enter_generation(result)
        log.info(
            "group %s: generation %d, member %s%s, assigned %s",
            self.group_id,
            result.generation,
            result.member_id,
            " (leader)" if result.member_id == result.leader else "",
            show_partitions(new),
        )
        revoked = old - new
        added = new - old
        if revoked:  # cooperative: what moves elsewhere is given up now, and we rejoin for the rest
            self.committer.commit_before_revoke(revoked)
            with member.lock:
                member.assignment = old - revoked
            self._invoke(self.on_revoke, revoked, "on_revoke")
            member.request_rejoin("partitions were revoked in a cooperative rebalance")
        with member.lock:
            member.assignment = new
        self._invoke(self.on_assign, added, "on_assign")
        return bool(revoked or added)

    def give_up_all(self) -> None:
        """Leaving (or unsubscribing): commit and give up every partition (``on_revoke``), or lose
        them when the member was thrown out."""
        if self.member.lost_reason is not None:
            self.lose_partitions()
        elif self.member.assignment:
            self.committer.commit_before_revoke()
            revoked = self.member.assignment
            with self.member.lock:
                self.member.assignment = frozenset()
            self._invoke(self.on_revoke, revoked, "on_revoke")

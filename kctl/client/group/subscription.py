"""What a group member subscribes to: topic names, or a pattern (with an exclusion) matched against
the cluster's topics every ``metadata.max.age.ms``; and, for the leader, the partition counts of the
group's topics, watched for changes. Either change asks the member to rejoin.

``TopicSubscription`` is the membership's collaborator for this, built with the cluster (metadata),
the group's settings and the ``Member``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable

from kctl.client.cluster import ClusterClient, Deadline
from kctl.client.errors import KafkaError
from kctl.client.group.join import partition_counts
from kctl.client.group.member import Member
from kctl.client.group.state import MemberState
from kctl.client.group_config import GroupConfig

log = logging.getLogger("kctl.client.group.membership")


def _topic_matcher(pattern: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    return pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)


class TopicSubscription:
    """The topics one member subscribes to (see the module docstring). ``topics``: those subscribed
    to now (for a pattern: those that matched at the last check); ``group_topics``: the leader's
    partition counts of the group's topics (None: not the leader, or nothing known)."""

    def __init__(self, cluster: ClusterClient, config: GroupConfig, member: Member) -> None:
        self.cluster = cluster
        self.config = config
        self.member = member
        self.group_id = member.group_id
        self.topics: frozenset[str] = frozenset()
        self.group_topics: dict[str, int] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._exclude: re.Pattern[str] | None = None
        self._next_metadata_check = 0.0

    def replace(
        self,
        names: Iterable[str],
        pattern: str | re.Pattern[str] | None,
        exclude: str | re.Pattern[str] | None,
    ) -> None:
        """Subscribe to ``names``, or to the topics whose whole name matches ``pattern`` and not
        ``exclude`` (checked at the next ``check_metadata``); the member rejoins."""
        with self.member.lock:
            self._pattern = _topic_matcher(pattern)
            self._exclude = _topic_matcher(exclude)
            self._next_metadata_check = 0.0
            if self._pattern is None:
                self._set_topics(frozenset(names), "subscription changed")
            else:
                self.member.request_rejoin("subscription changed")

    def clear(self) -> None:
        """Subscribe to nothing."""
        with self.member.lock:
            self._pattern = self._exclude = None
            self.topics = frozenset()

    def _set_topics(self, topics: frozenset[str], reason: str) -> None:
        if topics != self.topics or self.member.state is MemberState.UNJOINED:
            self.topics = topics
            self.member.request_rejoin(reason)

    def check_metadata(self) -> None:
        """Every ``metadata.max.age.ms`` (at once after ``replace``): match the pattern against the
        topic list; the leader also checks the group's topics' partition counts."""
        now = time.monotonic()
        if now < self._next_metadata_check:
            return
        self._next_metadata_check = now + self.config.metadata_max_age_ms / 1000
        deadline = Deadline(min(self.config.default_api_timeout, self.config.request_timeout))
        member = self.member
        try:
            if self._pattern is not None:
                metadata = self.cluster.refresh_metadata(None, deadline=deadline)
                matched = frozenset(
                    name
                    for name, topic in metadata.topics.items()
                    if not (topic.is_internal and self.config.exclude_internal_topics)
                    and not topic.error_code
                    and self._pattern.fullmatch(name)
                    and not (self._exclude is not None and self._exclude.fullmatch(name))
                )
                with member.lock:
                    self._set_topics(matched, f"the topics matching {self._pattern.pattern!r} changed")
            if member.is_leader and member.state is MemberState.STABLE and self.group_topics is not None:
                current = partition_counts(self.cluster, self.config, sorted(self.group_topics), deadline)
                if current != self.group_topics:
                    member.request_rejoin("the partitions of the group's topics changed")
        except KafkaError as error:
            log.info("group %s: metadata check failed: %s", self.group_id, error)
            self._next_metadata_check = now + self.config.retry_backoff_max_ms / 1000

"""Which source topics are mirrored, under which target names, and keeping the target's topics in
line with the source's: created with the source's partition count and relevant configs, grown when
the source grows.

* ``TopicPolicy`` — ``--include``/``--exclude`` regular expressions (matched against the whole
  source topic name), internal topics (``__…``, names ending ``.internal``, the mirror's own)
  excluded unless ``include_internal``, the ``--rename`` template (``{cluster}``, ``{topic}``;
  default ``{topic}``), and loop prevention: with ``{cluster}`` in the template, a topic whose name
  says it came from the target cluster (``agg.orders`` when mirroring into ``agg``, at any depth of
  renaming) is never mirrored back.
* ``plan_topics`` / ``TopicAction`` — what the target needs: create (partitions, configs), add
  partitions, or nothing; ``apply_topic_actions`` does it with an ``AdminClient``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kctl.client import AdminClient, ConfigSource, NewTopic, TopicDescription
from kctl.mirror.offset_syncs import OFFSET_SYNCS_TOPIC

__all__ = [
    "MIRRORED_CONFIGS",
    "TopicAction",
    "TopicPolicy",
    "apply_topic_actions",
    "plan_topics",
    "source_configs",
]

MIRRORED_CONFIGS = (
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.compaction.lag.ms",
    "retention.bytes",
    "retention.ms",
)
"""Topic configs copied from the source when the mirror creates a target topic (those set on the
source topic itself, not broker defaults)."""

DEFAULT_RENAME = "{topic}"


def is_internal_topic(name: str) -> bool:
    """``__consumer_offsets`` and the like, ``….internal`` (Kafka Connect's), the mirror's syncs."""
    return name.startswith("__") or name.endswith(".internal") or name == OFFSET_SYNCS_TOPIC


def _template_pattern(template: str) -> re.Pattern[str] | None:
    if "{cluster}" not in template or "{topic}" not in template:
        return None
    pattern = ""
    for part in re.split(r"(\{cluster\}|\{topic\})", template):
        if part == "{cluster}":
            pattern += r"(?P<cluster>[^.]+?)" if "cluster" not in pattern else r"(?:[^.]+?)"
        elif part == "{topic}":
            pattern += r"(?P<topic>.+)" if "?P<topic>" not in pattern else r"(?:.+)"
        else:
            pattern += re.escape(part)
    return re.compile(f"^{pattern}$")


@dataclass(frozen=True)
class TopicPolicy:
    """Topic selection and naming for one source into one target."""

    include: str = ".*"
    exclude: str | None = None
    rename: str = DEFAULT_RENAME
    include_internal: bool = False
    _include: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _exclude: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _renamed: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", re.compile(self.include))
        object.__setattr__(self, "_exclude", re.compile(self.exclude) if self.exclude else None)
        object.__setattr__(self, "_renamed", _template_pattern(self.rename))
        if "{topic}" not in self.rename:
            raise ValueError(f"--rename template {self.rename!r} has no {{topic}}")
        self.rename.format(cluster="c", topic="t")  # a bad template raises now (KeyError/ValueError)

    def target_topic(self, cluster: str, topic: str) -> str:
        return self.rename.format(cluster=cluster, topic=topic)

    def origin_clusters(self, topic: str) -> list[str]:
        """The clusters a topic's name says it went through, outermost first (``dc1.agg.orders``:
        dc1, agg) — empty when the template has no ``{cluster}``."""
        out: list[str] = []
        pattern = self._renamed
        while pattern is not None and len(out) < 16:
            match = pattern.match(topic)
            if match is None:
                break
            out.append(match.group("cluster"))
            topic = match.group("topic")
        return out

    def reason_to_skip(self, topic: str, target_cluster: str) -> str | None:
        """Why ``topic`` is not mirrored into ``target_cluster`` (None: it is)."""
        if not self.include_internal and is_internal_topic(topic):
            return "internal"
        if topic == OFFSET_SYNCS_TOPIC:
            return "internal"
        if not self._include.fullmatch(topic):
            return "not included"
        if self._exclude is not None and self._exclude.fullmatch(topic):
            return "excluded"
        if target_cluster in self.origin_clusters(topic):
            return f"came from {target_cluster} (loop)"
        return None


@dataclass(frozen=True)
class TopicAction:
    """What the target needs for one mirrored topic. ``action``: ``create``, ``add-partitions``,
    ``none``, or ``mismatch`` (the target has more partitions than the source: records are then
    partitioned by key)."""

    source_topic: str
    target_topic: str
    source_partitions: int
    target_partitions: int | None
    action: str
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def one_to_one(self) -> bool:
        return self.action != "mismatch"


def source_configs(admin: AdminClient, topics: Sequence[str]) -> dict[str, dict[str, str]]:
    """The MIRRORED_CONFIGS set on each source topic itself (not inherited defaults)."""
    out: dict[str, dict[str, str]] = {}
    for result in admin.describe_topic_configs(topics, keys=MIRRORED_CONFIGS):
        if not result.ok:
            continue
        out[result.name] = {
            e.name: e.value
            for e in result.entries
            if e.value is not None
            and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
            and e.name in MIRRORED_CONFIGS
        }
    return out


def plan_topics(
    source_topics: Iterable[TopicDescription],
    target_topics: Mapping[str, TopicDescription],
    policy: TopicPolicy,
    source_cluster: str,
    target_cluster: str,
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[TopicAction], dict[str, str]]:
    """The action for every mirrored topic, and the skipped topics with their reasons."""
    actions: list[TopicAction] = []
    skipped: dict[str, str] = {}
    for topic in source_topics:
        if not topic.ok:
            continue
        reason = policy.reason_to_skip(topic.name, target_cluster)
        if reason is not None:
            skipped[topic.name] = reason
            continue
        target_name = policy.target_topic(source_cluster, topic.name)
        count = len(topic.partitions)
        existing = target_topics.get(target_name)
        if existing is None or not existing.ok:
            action, target_count = "create", None
        else:
            target_count = len(existing.partitions)
            action = (
                "none" if target_count == count else "add-partitions" if target_count < count else "mismatch"
            )
        actions.append(
            TopicAction(
                topic.name,
                target_name,
                count,
                target_count,
                action,
                dict((configs or {}).get(topic.name, {})),
            )
        )
    return actions, skipped


def apply_topic_actions(
    admin: AdminClient, actions: Iterable[TopicAction], *, replication_factor: int = -1
) -> list[tuple[TopicAction, str | None]]:
    """Create or grow the target topics; each action with its error (None: done or nothing to do).
    A topic created meanwhile by someone else (TOPIC_ALREADY_EXISTS) counts as done."""
    results: list[tuple[TopicAction, str | None]] = []
    for action in actions:
        error: str | None = None
        if action.action == "create":
            (result,) = admin.create_topics(
                [
                    NewTopic(
                        action.target_topic,
                        action.source_partitions,
                        replication_factor,
                        dict(action.configs),
                    )
                ]
            )
            if not result.ok and result.error != "TOPIC_ALREADY_EXISTS":
                error = f"{result.error}: {result.error_message or ''}".rstrip(": ")
        elif action.action == "add-partitions":
            grown = admin.create_partitions(action.target_topic, action.source_partitions)
            if not grown.ok and grown.error != "INVALID_PARTITIONS":
                error = f"{grown.error}: {grown.error_message or ''}".rstrip(": ")
        results.append((action, error))
    return results

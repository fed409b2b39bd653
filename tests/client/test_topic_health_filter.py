"""The health rules of `kctl topic describe` (kctl.client.admin.topic_report), the one place they
live: under-replicated, unavailable and under-min-ISR, with min.insync.replicas read from the
topic's configs (1 when it is not there or not a number, Kafka's default)."""

from __future__ import annotations

from typing import Any

import pytest

from kctl.client.admin.results import ConfigEntry, TopicConfigs
from kctl.client.admin.topic_report import HealthFilter, _min_insync_replicas
from kctl.protocol.configs import ConfigSource


def partition(replicas: int, isr: int, available: bool = True) -> dict[str, Any]:
    return {"replicas": list(range(replicas)), "isr": list(range(isr)), "available": available}


def configs(value: str | None) -> TopicConfigs:
    entry = ConfigEntry("min.insync.replicas", value, ConfigSource.DYNAMIC_TOPIC_CONFIG, False, False)
    return TopicConfigs("t", entries=(entry,))


@pytest.mark.parametrize(
    ("topic_configs", "expected"),
    [(None, 1), (TopicConfigs("t"), 1), (configs("2"), 2), (configs(None), 1), (configs("two"), 1)],
)
def test_min_insync_replicas_defaults_to_one(topic_configs: TopicConfigs | None, expected: int) -> None:
    assert _min_insync_replicas(topic_configs) == expected


def test_under_min_isr_is_an_isr_smaller_than_min_insync_replicas() -> None:
    rule = HealthFilter(under_min_isr=True)
    assert rule.keeps(partition(3, 1), min_isr=2)
    assert not rule.keeps(partition(3, 2), min_isr=2)
    assert not rule.keeps(partition(3, 0, available=False), min_isr=0)


def test_the_rules_combine_with_or_and_no_rule_keeps_everything() -> None:
    healthy, lagging, offline = partition(3, 3), partition(3, 2), partition(1, 0, available=False)
    assert [HealthFilter().keeps(p, 1) for p in (healthy, lagging, offline)] == [True] * 3
    either = HealthFilter(under_replicated=False, unavailable=True, under_min_isr=True)
    assert [either.keeps(p, 3) for p in (healthy, lagging, offline)] == [False, True, True]
    assert [HealthFilter(under_replicated=True).keeps(p, 1) for p in (healthy, lagging)] == [False, True]

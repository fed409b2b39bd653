"""A Jepsen-style check of committed consumer offsets (issue 24's checkers): under the faults of a
`kctl.testing.jepsen.Campaign`, a consumer group's committed offsets must never go backwards — a
group coordinator that moved (its broker killed, paused, cut off) must load every commit it
acknowledged before, never an older one.

`CommittedOffsetsWatcher(bootstrap, topic, group)` runs a confluent-kafka consumer in ``group``
reading ``topic`` with auto commit (every 200 ms) on one thread, and on another asks the cluster
for the group's committed offsets (OffsetFetch through the admin client) every ``interval_s``,
recording each answer. ``regressions`` names every partition whose committed offset was seen lower
than one seen before; ``observations`` counts the answers (errors while the coordinator moves are
retried, not counted)."""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient


class CommittedOffsetsWatcher:
    """A consuming group and a watcher of its committed offsets (see the module docstring)."""

    def __init__(self, bootstrap: str, topic: str, group: str, *, interval_s: float = 0.2) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.interval_s = interval_s
        self.regressions: list[str] = []
        self.observations = 0
        self.highest: dict[int, int] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._consume, name=f"offsets-consumer-{group}", daemon=True),
            threading.Thread(target=self._watch, name=f"offsets-watcher-{group}", daemon=True),
        ]

    def start(self) -> CommittedOffsetsWatcher:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "session.timeout.ms": 10000,
                "log_level": 0,
            }
        )
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                consumer.poll(0.1)
        except Exception as error:  # reported: the check then proves nothing, and says so
            self.errors.append(f"consumer: {error!r}")
        finally:
            consumer.close()

    def _watch(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        while not self._stop.wait(self.interval_s):
            try:
                future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(self.group)])[
                    self.group
                ]
                answer: Any = future.result(timeout=10)
            except (KafkaException, TimeoutError) as error:
                self.errors.append(f"offset fetch: {error}")
                continue
            self.observations += 1
            for tp in answer.topic_partitions or []:
                if tp.topic != self.topic or tp.error is not None or tp.offset < 0:
                    continue
                before = self.highest.get(tp.partition, -1)
                if tp.offset < before:
                    self.regressions.append(
                        f"{self.topic}/{tp.partition}: committed offset went back: {before} -> {tp.offset}"
                    )
                self.highest[tp.partition] = max(before, tp.offset)

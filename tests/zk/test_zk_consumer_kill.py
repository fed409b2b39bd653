"""ZooKeeper-mode consumers as separate processes (`kctl consume --group G --zookeeper ...`) against a
real ZooKeeper server and broker: one is killed with SIGKILL, its ephemeral registration and
ownership znodes vanish when its session times out, its partitions move to the others, and every
record is consumed at least once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import zk_support
from zk_support import ZkCluster

from kctl.testing import wait_for

zk_cluster = zk_support.zk_cluster  # the fixture, shared


class ConsumeProcess:
    """`python -m kctl consume TOPIC --group G --zookeeper ZK -f jsonl`, writing to a file."""

    def __init__(self, cluster: ZkCluster, topic: str, group: str, out: Path) -> None:
        self.out = out
        self.stream = out.open("wb")
        self.errors = out.with_suffix(".err").open("wb")
        environment = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kctl",
                "consume",
                topic,
                "--group",
                group,
                "--zookeeper",
                cluster.connect,
                "-b",
                cluster.bootstrap,
                "--offset",
                "beginning",
                "--format",
                "jsonl",
                "--quiet",
                "-X",
                "zookeeper.session.timeout.ms=4000",
                "-X",
                "rebalance.backoff.ms=200",
                "-X",
                "rebalance.max.retries=100",
                "-X",
                "auto.commit.interval.ms=200",
                "-X",
                "fetch.max.wait.ms=100",
            ],
            stdout=self.stream,
            stderr=self.errors,
            env=environment,
        )

    def records(self) -> set[tuple[int, int]]:
        text = self.out.read_text()
        complete = text[: text.rfind("\n") + 1]  # a line being written is read next time
        return {(r["partition"], r["offset"]) for r in map(json.loads, complete.splitlines()) if r}

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(30)
        finally:
            self.stream.close()
            self.errors.close()
        return code

    def stderr(self) -> str:
        return self.out.with_suffix(".err").read_text(errors="replace")


@pytest.fixture
def processes() -> Iterator[list[ConsumeProcess]]:
    started: list[ConsumeProcess] = []
    yield started
    for p in started:
        if p.process.poll() is None:
            p.process.kill()
            p.process.wait(10)
        p.stream.close()
        p.errors.close()


@pytest.mark.slow
def test_killed_consumer_loses_its_partitions_after_the_session_timeout(
    zk_cluster: ZkCluster,
    processes: list[ConsumeProcess],
    tmp_path: Path,
) -> None:
    topic, group = f"kill-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    zk_cluster.create_topic(topic, 6)
    processes += [ConsumeProcess(zk_cluster, topic, group, tmp_path / f"c{i}.jsonl") for i in range(3)]
    registry = zk_cluster.registry()
    try:

        def owned_by() -> dict[str, set[tuple[str, int]]]:
            out: dict[str, set[tuple[str, int]]] = {}
            for tp, who in registry.owners(group).items():
                out.setdefault(who, set()).add(tp)
            return out

        wait_for(
            lambda: sorted(map(len, owned_by().values())) == [2, 2, 2],
            "two partitions per consumer",
            60,
        )
        ids = set(registry.consumers(group))
        assert len(ids) == 3 and set(owned_by()) == ids, "every owner is a registered consumer"
        zk_cluster.produce(topic, 6, 300)
        wait_for(lambda: sum(len(p.records()) for p in processes) >= 300, "300 records read", 60)

        victim = processes[0]
        before = set(registry.consumers(group))
        victim.process.kill()  # SIGKILL: no commit, no release, no unregister
        victim.process.wait(10)
        wait_for(lambda: len(registry.consumers(group)) == 2, "the killed consumer's id znode to vanish", 30)
        [dead] = before - set(registry.consumers(group))
        wait_for(
            lambda: (
                dead not in registry.owners(group).values()
                and sorted(map(len, owned_by().values())) == [3, 3]
            ),
            "its partitions to move to the two others",
            30,
        )
        zk_cluster.produce(topic, 6, 300, start=300)
        everything = {(p, o) for p in range(6) for o in range(100)}
        wait_for(lambda: set().union(*(p.records() for p in processes)) >= everything, "all 600 records", 60)
        for p in processes[1:]:
            assert p.stop() == 130, p.stderr()
        assert registry.consumers(group) == {} and registry.owners(group) == {}
        committed = registry.committed_offsets(group)
        assert committed == {(topic, p): 100 for p in range(6)}, committed
    finally:
        registry.close()

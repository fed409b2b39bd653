"""`kctl broker log-dirs` against a running broker: the log dir with its replicas and their sizes on
disk (checked against the segment files), topic filtering, formats and exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

from kctl.client import TopicPartition
from kctl.log.naming import partition_dir_name

if TYPE_CHECKING:
    from kctl.testing import BrokerProcess


def kctl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "KCTL_BOOTSTRAP_SERVER"}
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        env={**environment, "COLUMNS": "200"},
    )


def on_disk(broker: BrokerProcess, topic: str, partition: int) -> int:
    directory = broker.data_dir / partition_dir_name(TopicPartition(topic, partition))
    return sum(path.stat().st_size for path in directory.glob("*.log"))


def test_log_dirs_lists_replicas_with_their_sizes(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert kctl("topic", "create", "big", "-p", "2", "-b", b).returncode == 0
    assert kctl("topic", "create", "small", "-b", b).returncode == 0
    lines = "".join(f"line {i}\n" for i in range(500))
    assert kctl("produce", "big", "-b", b, "-p", "0", stdin=lines).returncode == 0
    assert kctl("produce", "big", "-b", b, "-p", "1", stdin=lines[:1000]).returncode == 0
    assert kctl("produce", "small", "-b", b, stdin="one\n").returncode == 0

    result = kctl("broker", "log-dirs", "-b", b, "-f", "json")
    assert result.returncode == 0, result.stderr
    [log_dir] = json.loads(result.stdout)
    assert (log_dir["broker"], log_dir["log_dir"], log_dir["error"]) == (
        0,
        str(broker.data_dir.resolve()),
        None,
    )
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    sizes = {(r["topic"], r["partition"]): r["size"] for r in log_dir["replicas"]}
    expected = {(t, p): on_disk(broker, t, p) for t, p in [("big", 0), ("big", 1), ("small", 0)]}
    assert sizes == expected
    assert expected[("big", 0)] + expected[("big", 1)] > 10 * expected[("small", 0)] > 0
    assert log_dir["size"] == sum(expected.values()) and log_dir["replica_count"] == 3

    only_small = kctl("broker", "log-dirs", "-b", b, "--topic", "small", "-f", "jsonl")
    assert only_small.returncode == 0, only_small.stderr
    [line] = only_small.stdout.splitlines()
    assert [(r["topic"], r["size"]) for r in json.loads(line)["replicas"]] == [
        ("small", expected[("small", 0)])
    ]

    human = kctl("broker", "log-dirs", "-b", b)
    assert human.returncode == 0, human.stderr
    human_rows = [row.split() for row in human.stdout.split("\n\n")[1].strip().splitlines()[1:]]
    assert [r[4] for r in human_rows] == [
        f"{s}B" if s < 1024 else f"{s / 1024:.1f}KiB" for _, s in sorted(expected.items())
    ]
    table = kctl("broker", "log-dirs", "-b", b, "--bytes")
    assert table.returncode == 0, table.stderr
    dirs_table, replicas_table = table.stdout.split("\n\n")
    assert dirs_table.split()[:7] == ["BROKER", "LOG-DIR", "ERROR", "REPLICAS", "SIZE", "USABLE", "TOTAL"]
    rows = [row.split() for row in replicas_table.strip().splitlines()]
    assert rows[0] == ["BROKER", "LOG-DIR", "TOPIC", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE"]
    assert [(r[2], r[3], int(r[4])) for r in rows[1:]] == [
        (t, str(p), s) for (t, p), s in sorted(expected.items())
    ]


def test_log_dirs_missing_topics_and_brokers(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert kctl("topic", "create", "here", "-b", b).returncode == 0
    none = kctl("broker", "log-dirs", "-b", b, "--topic", "absent")
    assert none.returncode == 3 and "absent" in none.stderr and none.stdout == ""
    some = kctl("broker", "log-dirs", "-b", b, "--topic", "absent", "--topic", "here", "-f", "json")
    assert some.returncode == 1 and "absent" in some.stderr
    assert [r["topic"] for r in json.loads(some.stdout)[0]["replicas"]] == ["here"]
    unknown_broker = kctl("broker", "log-dirs", "-b", b, "--broker", "7", "-X", "default.api.timeout.ms=2000")
    assert unknown_broker.returncode in (1, 3) and "broker 7" in unknown_broker.stderr

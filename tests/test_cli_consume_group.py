"""`kctl consume --group`: partitions assigned by the group, reading resumes at committed offsets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

GROUP_BROKER = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "3",
    "num.partitions": "2",
}


def kctl(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=input,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_group_consumption_resumes_at_the_committed_offsets(broker_factory) -> None:
    broker = broker_factory(GROUP_BROKER)
    b = ["-b", broker.bootstrap]
    produced = kctl("produce", "gtopic", *b, input="".join(f"r{i}\n" for i in range(20)))
    assert produced.returncode == 0, produced.stderr
    first = kctl(
        "consume", "gtopic", "--group", "g1", "--offset", "beginning", "--max", "20", "-f", "jsonl", *b
    )
    assert first.returncode == 0, first.stderr
    values = sorted(json.loads(line)["value"] for line in first.stdout.splitlines())
    assert values == sorted(f"r{i}" for i in range(20))
    assert "member of group g1" in first.stderr
    more = kctl("produce", "gtopic", *b, input="".join(f"s{i}\n" for i in range(5)))
    assert more.returncode == 0, more.stderr
    second = kctl("consume", "gtopic", "--group", "g1", "--max", "5", "-f", "jsonl", *b)
    assert second.returncode == 0, second.stderr
    assert sorted(json.loads(line)["value"] for line in second.stdout.splitlines()) == [
        f"s{i}" for i in range(5)
    ]
    described = kctl("group", "describe", "g1", "-f", "json", *b)
    assert described.returncode == 0, described.stderr
    document = json.loads(described.stdout)
    group = document[0] if isinstance(document, list) else document
    assert group["total_lag"] == 0  # everything read was committed when the command left the group
    assert sum(1 for o in group["offsets"] if o["topic"] == "gtopic") == 2


def test_group_mode_rejects_ranges_and_partitions(broker_factory) -> None:
    broker = broker_factory(GROUP_BROKER)
    b = ["-b", broker.bootstrap]
    assert kctl("consume", "t", "--group", "g", "--until", "end", *b).returncode == 2
    assert kctl("consume", "t", "--group", "g", "-p", "0", *b).returncode == 2
    assert kctl("consume", "t", "--group", "g", "--offset", "-5", *b).returncode == 2


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_stops_a_group_member_as_cleanly_as_ctrl_c(broker_factory, stop: signal.Signals) -> None:
    """Stopped by either signal, the member commits what it printed and leaves the group at once,
    so `group rewind` need not wait for its session to expire."""
    broker = broker_factory(GROUP_BROKER)
    b = ["-b", broker.bootstrap]
    topic, group = f"sig-{stop.name.lower()}", f"g-{stop.name.lower()}"
    assert kctl("produce", topic, *b, input="".join(f"r{i}\n" for i in range(10))).returncode == 0
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kctl",
            "consume",
            topic,
            "--group",
            group,
            "-o",
            "beginning",
            "-f",
            "jsonl",
            *b,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(10)]  # every record printed: it is reading
        assert all(lines)
        process.send_signal(stop)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == (143 if stop == signal.SIGTERM else 130), err
    assert "Traceback" not in err
    described = kctl("group", "describe", group, "-f", "json", *b)
    assert described.returncode == 0, described.stderr
    document = json.loads(described.stdout)
    state = document[0] if isinstance(document, list) else document
    assert state["state"] == "Empty" and state["total_lag"] == 0, state

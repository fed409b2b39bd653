"""`kctl consume --group`: partitions assigned by the group, reading resumes at committed offsets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

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
    assert kctl("consume", "t", "--group", "g", "--until", "5", *b).returncode == 2
    assert kctl("consume", "t", "--group", "g", "--until", "@-1h", *b).returncode == 2
    zookeeper = ["--zookeeper", "127.0.0.1:1"]
    assert kctl("consume", "t", "--group", "g", "--until", "end", *zookeeper, *b).returncode == 2
    assert kctl("consume", "t", "--group", "g", "-p", "0", *b).returncode == 2
    assert kctl("consume", "t", "--group", "g", "--offset", "-5", *b).returncode == 2
    empty = kctl("consume", "t", "--group", "", *b)
    assert empty.returncode == 2 and "group id must not be empty" in empty.stderr, empty.stderr
    bad = kctl("consume", "t", "--group", "g", "-X", "session.timeout.ms=1000", *b)  # heartbeat 3000
    assert bad.returncode == 2 and "heartbeat.interval.ms" in bad.stderr and "unexpected" not in bad.stderr


def test_a_refused_join_names_the_group_once(broker_factory) -> None:
    """JoinGroup refused (a session timeout below group.min.session.timeout.ms): exit 1, and the
    message says `group 'g':` once, with the request that failed (it said the group twice)."""
    broker = broker_factory(GROUP_BROKER)
    refused = kctl(
        "consume", "t", "--group", "short", "-X", "session.timeout.ms=500", "-X", "heartbeat.interval.ms=100",
        "-b", broker.bootstrap,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert "group 'short': JoinGroup: INVALID_SESSION_TIMEOUT" in refused.stderr
    assert refused.stderr.count("group 'short'") == 1, refused.stderr


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


@pytest.fixture(scope="module")
def drain_broker(module_broker_factory):
    return module_broker_factory(GROUP_BROKER)


def describe_group(bootstrap: str, group: str) -> dict:
    described = kctl("group", "describe", group, "-f", "json", "-b", bootstrap)
    assert described.returncode == 0, described.stderr
    document = json.loads(described.stdout)
    return document[0] if isinstance(document, list) else document


def test_group_until_end_drains_commits_leaves_and_exits(drain_broker) -> None:
    """`--group G --until end` (kcat -G ... -e): read what the assigned partitions hold, commit,
    leave the group, exit 0; the next run finds nothing new and exits at once."""
    b = ["-b", drain_broker.bootstrap]
    assert kctl("topic", "create", "drain", "-p", "3", *b).returncode == 0
    produced = kctl("produce", "drain", *b, input="".join(f"r{i}\n" for i in range(30)))
    assert produced.returncode == 0, produced.stderr
    first = kctl("consume", "drain", "--group", "gd", "--until", "end", "-f", "jsonl", *b)
    assert first.returncode == 0, first.stderr
    assert sorted(json.loads(line)["value"] for line in first.stdout.splitlines()) == sorted(
        f"r{i}" for i in range(30)
    )
    assert "consumed 30 records as a member of group gd" in first.stderr
    state = describe_group(drain_broker.bootstrap, "gd")
    assert state["state"] == "Empty" and state["total_lag"] == 0, state  # committed, then left
    assert sum(o["committed_offset"] for o in state["offsets"] if o["topic"] == "drain") == 30

    assert kctl("produce", "drain", *b, input="s0\ns1\n").returncode == 0
    second = kctl("consume", "drain", "--group", "gd", "--until", "end", "-f", "raw", *b)
    assert second.returncode == 0, second.stderr
    assert sorted(second.stdout.split()) == ["s0", "s1"]
    third = kctl("consume", "drain", "--group", "gd", "--until", "end", "-f", "raw", *b)
    assert third.returncode == 0, third.stderr
    assert third.stdout == "" and "consumed 0 records" in third.stderr


def test_group_until_end_with_max_and_members_sharing_the_partitions(drain_broker) -> None:
    b = ["-b", drain_broker.bootstrap]
    assert kctl("topic", "create", "drain2", "-p", "4", *b).returncode == 0
    values = [f"v{i}" for i in range(40)]
    assert kctl("produce", "drain2", *b, input="".join(v + "\n" for v in values)).returncode == 0
    # --max stops first: what was printed is committed, the rest is left for the next member
    limited = kctl("consume", "drain2", "--group", "gm", "--until", "end", "--max", "5", "-f", "raw", *b)
    assert limited.returncode == 0, limited.stderr
    assert len(limited.stdout.split()) == 5
    assert describe_group(drain_broker.bootstrap, "gm")["total_lag"] == 35
    # two members at once: together they read the rest, and each exits on its own
    command = [sys.executable, "-m", "kctl", "consume", "drain2", "--group", "gm", "--until", "end"]
    command += ["-f", "raw", *b]
    members = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = []
    for member in members:
        out, err = member.communicate(timeout=120)
        assert member.returncode == 0, err
        outputs.extend(out.split())
    assert set(limited.stdout.split()) | set(outputs) == set(values)
    state = describe_group(drain_broker.bootstrap, "gm")
    assert state["state"] == "Empty" and state["total_lag"] == 0, state


def test_group_until_end_exits_while_producers_keep_writing(drain_broker) -> None:
    """The ends are those seen when the partitions were assigned: records written later are left
    for the next run, so the command exits although the topic keeps growing."""
    import threading
    import time

    b = ["-b", drain_broker.bootstrap]
    assert kctl("topic", "create", "drain3", "-p", "2", *b).returncode == 0
    assert kctl("produce", "drain3", *b, input="".join(f"a{i}\n" for i in range(20))).returncode == 0
    producer = subprocess.Popen(
        [sys.executable, "-m", "kctl", "produce", "drain3", "-X", "linger.ms=0", *b],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()

    def keep_writing() -> None:
        assert producer.stdin is not None
        i = 0
        while not stop.is_set():
            producer.stdin.write(f"b{i}\n")
            producer.stdin.flush()
            i += 1
            time.sleep(0.01)

    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        drained = kctl("consume", "drain3", "--group", "gw", "--until", "end", "-f", "raw", *b)
    finally:
        stop.set()
        writer.join(10)
        assert producer.stdin is not None
        producer.stdin.close()
        producer.wait(60)
    assert drained.returncode == 0, drained.stderr
    read = drained.stdout.split()
    assert {f"a{i}" for i in range(20)} <= set(read)
    state = describe_group(drain_broker.bootstrap, "gw")
    assert state["state"] == "Empty", state
    committed = sum(o["committed_offset"] for o in state["offsets"] if o["topic"] == "drain3")
    assert committed == len(read)  # nothing past what was printed is committed


def test_group_drain_leaves_records_produced_after_assignment_uncommitted(drain_broker) -> None:
    """GroupDrain: records past the end seen at assignment are not handed on; the partition goes
    back to that end and pauses, so the commit stops there and the next member reads the rest."""
    from kctl.client import GroupConsumer, TopicPartition
    from kctl.console.consume import GroupDrain

    b = ["-b", drain_broker.bootstrap]
    assert kctl("topic", "create", "late", "-p", "1", *b).returncode == 0
    assert kctl("produce", "late", *b, input="".join(f"r{i}\n" for i in range(5))).returncode == 0
    tp = TopicPartition("late", 0)
    properties = {"group.id": "g-late", "auto.offset.reset": "earliest", "enable.auto.commit": "false"}
    handed_on, stopped = [], 0
    with GroupConsumer(drain_broker.bootstrap, properties) as consumer:
        drain = GroupDrain(consumer)
        consumer.subscribe(["late"])
        deadline = time.monotonic() + 60
        while not drain.ends and time.monotonic() < deadline:  # until the member holds the partition
            handed_on += [r.value for r in consumer.poll(0.2)]
            drain.update()
        assert drain.ends == {tp: 5}
        produced = kctl("produce", "late", *b, input="".join(f"s{i}\n" for i in range(5)))
        assert produced.returncode == 0, produced.stderr
        while not (stopped and drain.finished()) and time.monotonic() < deadline:
            for record in consumer.poll(0.2):
                if drain.past_end(record):
                    stopped += 1
                else:
                    handed_on.append(record.value)
        assert stopped > 0  # the late records were fetched, and held back
        assert consumer.position(tp) == 5 and tp in consumer.paused()
        consumer.commit()
    assert handed_on == [f"r{i}".encode() for i in range(5)]
    assert describe_group(drain_broker.bootstrap, "g-late")["offsets"][0]["committed_offset"] == 5
    rest = kctl("consume", "late", "--group", "g-late", "--until", "end", "-f", "raw", *b)
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.split() == [f"s{i}" for i in range(5)]

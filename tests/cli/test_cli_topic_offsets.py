"""`kctl topic offsets` (kcat -Q, kafka-get-offsets.sh --time) and `kctl topic trim`
(kafka-delete-records.sh, rpk topic trim-prefix) against a real broker."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from cli_support import kctl

BASE_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z


def fill(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    """Create ``topic`` with ``len(counts)`` partitions; partition p gets counts[p] records whose
    timestamps are BASE_MS + 1000 * i."""
    created = kctl("topic", "create", topic, "-p", str(len(counts)), "-b", bootstrap)
    assert created.returncode == 0, created.stderr
    lines = [
        json.dumps({"partition": p, "timestamp": BASE_MS + 1000 * i, "value": f"p{p}-{i}"})
        for p, n in counts.items()
        for i in range(n)
    ]
    produced = kctl(
        "produce", topic, "-f", "jsonl", "--keep-partition", "--keep-timestamp", "-b", bootstrap,
        input="\n".join(lines) + "\n",
    )
    assert produced.returncode == 0, produced.stderr


def offsets(bootstrap: str, *args: str) -> list[dict[str, Any]]:
    result = kctl("topic", "offsets", *args, "-b", bootstrap, "-f", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def broker(module_broker_factory: Any) -> Any:
    broker = module_broker_factory()
    fill(broker.bootstrap, "offs", {0: 10, 1: 4, 2: 0})
    return broker


def test_earliest_and_latest_without_time(broker: Any) -> None:
    assert offsets(broker.bootstrap, "offs") == [
        {"topic": "offs", "partition": 0, "earliest": 0, "latest": 10},
        {"topic": "offs", "partition": 1, "earliest": 0, "latest": 4},
        {"topic": "offs", "partition": 2, "earliest": 0, "latest": 0},
    ]


def test_offsets_for_a_time(broker: Any) -> None:
    rows = offsets(broker.bootstrap, "offs", "--time", f"@{BASE_MS + 3000}")
    assert rows == [
        {"topic": "offs", "partition": 0, "offset": 3, "timestamp": BASE_MS + 3000},
        {"topic": "offs", "partition": 1, "offset": 3, "timestamp": BASE_MS + 3000},
        {"topic": "offs", "partition": 2, "offset": 0, "timestamp": None},
    ]
    # between two records: the first at or after; RFC 3339; after the last record: the end
    rows = offsets(broker.bootstrap, "offs", "--time", "@2027-01-15T08:00:05.500Z", "-p", "0", "-p", "1")
    assert [(r["partition"], r["offset"], r["timestamp"]) for r in rows] == [
        (0, 6, BASE_MS + 6000),
        (1, 4, None),
    ]
    table = kctl(
        "topic", "offsets", "offs", "--time", f"@{BASE_MS + 3000}", "-p", "0", "-b", broker.bootstrap
    )
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[1].split() == ["offs", "0", "3", "2027-01-15T08:00:03.000Z"]


def test_offsets_for_grammar_points(broker: Any) -> None:
    def at(spec: str) -> list[int]:
        return [r["offset"] for r in offsets(broker.bootstrap, "offs", "--time", spec)]

    assert at("beginning") == [0, 0, 0]
    assert at("end") == [10, 4, 0]
    assert at("-3") == [7, 1, 0]
    assert at("+5") == [5, 4, 0]
    assert at("@-1h") == [0, 0, 0]  # the records are dated 2027: all are newer than an hour ago
    assert at("@2028-01-01") == [10, 4, 0]  # no record at or after it: the end


def test_offsets_errors(broker: Any) -> None:
    assert kctl("topic", "offsets", "offs", "--time", "soon", "-b", broker.bootstrap).returncode == 2
    assert kctl("topic", "offsets", "offs", "--time", "1:5", "-b", broker.bootstrap).returncode == 2
    missing = kctl("topic", "offsets", "no-such", "-b", broker.bootstrap)
    assert missing.returncode == 3 and "no-such" in missing.stderr
    assert kctl("topic", "offsets", "offs", "-p", "9", "-b", broker.bootstrap).returncode == 3


def trim(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return kctl("topic", "trim", *args, "-b", bootstrap)


def test_trim_plans_first_then_executes(module_broker_factory: Any, broker: Any) -> None:
    fill(broker.bootstrap, "trimmed", {0: 10, 1: 8})
    plan = trim(broker.bootstrap, "trimmed", "--to", "6", "-f", "json")
    assert plan.returncode == 0, plan.stderr
    assert [
        (r["partition"], r["log_start_offset"], r["new_log_start_offset"], r["removed"], r["status"])
        for r in json.loads(plan.stdout)
    ] == [(0, 0, 6, 6, "to trim"), (1, 0, 6, 6, "to trim")]
    assert "--execute" in plan.stderr
    assert [r["earliest"] for r in offsets(broker.bootstrap, "trimmed")] == [0, 0]  # nothing changed

    done = trim(broker.bootstrap, "trimmed", "--to", "6", "-p", "0", "--execute", "-f", "json")
    assert done.returncode == 0, done.stderr
    assert [(r["partition"], r["new_log_start_offset"], r["status"]) for r in json.loads(done.stdout)] == [
        (0, 6, "trimmed")
    ]
    assert offsets(broker.bootstrap, "trimmed") == [
        {"topic": "trimmed", "partition": 0, "earliest": 6, "latest": 10},
        {"topic": "trimmed", "partition": 1, "earliest": 0, "latest": 8},
    ]
    consumed = kctl("consume", "trimmed", "-p", "0", "-o", "beginning", "--until", "end", "-f", "raw",
                    "-b", broker.bootstrap)
    assert consumed.stdout.split() == [f"p0-{i}" for i in range(6, 10)]

    # keep the last record of every partition (time-based points work too); an earlier point is a no-op
    again = trim(broker.bootstrap, "trimmed", "--to", "-1", "--execute", "-f", "json")
    assert again.returncode == 0, again.stderr
    assert [(r["new_log_start_offset"], r["removed"]) for r in json.loads(again.stdout)] == [(9, 3), (7, 7)]
    noop = trim(broker.bootstrap, "trimmed", "--to", f"@{BASE_MS}", "--execute", "-f", "json")
    assert noop.returncode == 0, noop.stderr
    assert [r["status"] for r in json.loads(noop.stdout)] == ["unchanged", "unchanged"]
    assert [r["earliest"] for r in offsets(broker.bootstrap, "trimmed")] == [9, 7]


def test_trim_refuses_an_offset_past_the_high_watermark(broker: Any) -> None:
    """Issue 25: `--to 999999` answered "trimmed" and deleted every record. An offset past the high
    watermark (N, or +N landing there) is refused, in the plan and with --execute, and nothing is
    deleted anywhere; `end` stays the way to delete everything."""
    fill(broker.bootstrap, "guarded", {0: 10, 1: 4})
    untouched = [
        {"topic": "guarded", "partition": 0, "earliest": 0, "latest": 10},
        {"topic": "guarded", "partition": 1, "earliest": 0, "latest": 4},
    ]
    for args in (["--to", "999999"], ["--to", "999999", "--execute"]):
        refused = trim(broker.bootstrap, "guarded", *args)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stdout == ""
        [line] = refused.stderr.splitlines()
        assert "guarded-0 (high watermark 10)" in line and "guarded-1 (high watermark 4)" in line, line
        assert "nothing trimmed" in line
        assert offsets(broker.bootstrap, "guarded") == untouched
    # one partition past its end refuses the whole trim: partition 0 keeps its records too
    partly = trim(broker.bootstrap, "guarded", "--to", "6", "--execute")
    assert partly.returncode == 2 and "guarded-1 (high watermark 4)" in partly.stderr
    assert "guarded-0" not in partly.stderr
    plus = trim(broker.bootstrap, "guarded", "--to", "+5", "-p", "1", "--execute")
    assert plus.returncode == 2 and "guarded-1 (high watermark 4)" in plus.stderr
    assert offsets(broker.bootstrap, "guarded") == untouched
    consumed = kctl(
        "consume", "guarded", "-o", "beginning", "--until", "end", "-f", "raw", "-b", broker.bootstrap
    )
    assert len(consumed.stdout.split()) == 14

    # -N beyond the log start deletes nothing; the high watermark itself and `end` are explicit
    nothing = trim(broker.bootstrap, "guarded", "--to", "-100", "--execute", "-f", "json")
    assert nothing.returncode == 0, nothing.stderr
    assert [r["status"] for r in json.loads(nothing.stdout)] == ["unchanged", "unchanged"]
    exact = trim(broker.bootstrap, "guarded", "--to", "4", "-p", "1", "--execute", "-f", "json")
    assert exact.returncode == 0, exact.stderr
    assert [(r["new_log_start_offset"], r["removed"]) for r in json.loads(exact.stdout)] == [(4, 4)]
    everything = trim(broker.bootstrap, "guarded", "--to", "end", "-p", "0", "--execute", "-f", "json")
    assert everything.returncode == 0, everything.stderr
    done = [(r["new_log_start_offset"], r["status"]) for r in json.loads(everything.stdout)]
    assert done == [(10, "trimmed")]
    assert [r["earliest"] for r in offsets(broker.bootstrap, "guarded")] == [10, 4]


def test_trim_errors(broker: Any) -> None:
    assert trim(broker.bootstrap, "offs").returncode == 2  # --to is required
    assert trim(broker.bootstrap, "offs", "--to", "x").returncode == 2
    assert trim(broker.bootstrap, "no-such", "--to", "5").returncode == 3
    assert trim(broker.bootstrap, "offs", "--to", "5", "-p", "7").returncode == 3

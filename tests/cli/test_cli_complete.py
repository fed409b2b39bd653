"""Shell completion of topic and group names from a reachable broker (issue 15): the generated bash
and fish scripts ask `kctl complete topics|groups`, passing on the -b/-c/-X options typed, and offer
nothing (quickly, silently) when no broker answers."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from kctl.testing import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(module_broker_factory: Any) -> Any:
    broker = module_broker_factory()
    for topic in ("orders", "orders-dlq", "payments"):
        done = kctl("topic", "create", topic, "-p", "1", "-b", broker.bootstrap)
        assert done.returncode == 0, done.stderr
    for group in ("billing", "billing-audit"):
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
        consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(0, "", -1)})
        consumer.close()
    return broker


@pytest.fixture(scope="module")
def kctl_on_path(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment whose PATH finds a `kctl` that runs this checkout (as an installed kctl would)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    wrapper = bin_dir / "kctl"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kctl "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": pythonpath}


def kctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=60)


def bash_complete(line: str, env: dict[str, str]) -> list[str]:
    """What TAB offers at the end of `line`, as bash fills COMP_LINE/COMP_WORDS (':' splits words)."""
    program = (
        f"source '{REPO / 'completions' / 'kctl.bash'}'\n"
        'COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}\n'
        "COMP_WORDBREAKS=${COMP_WORDBREAKS:-$' \\t\\n\"\\'><=;|&(:'}\n"
        "read -ra COMP_WORDS <<< \"${COMP_LINE//:/ : }\"\n"
        '[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")\n'
        "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()\n"
        "_kctl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    done = subprocess.run(
        ["bash", "-c", program, "bash", line], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    return [name for name in done.stdout.splitlines() if name]


def test_complete_prints_topic_and_group_names(broker: Any) -> None:
    topics = kctl("complete", "topics", "-b", broker.bootstrap)
    assert topics.returncode == 0, topics.stderr
    assert {"orders", "orders-dlq", "payments"} <= set(topics.stdout.split())
    prefixed = kctl("complete", "topics", "-b", broker.bootstrap, "--", "ord")
    assert prefixed.stdout.split() == ["orders", "orders-dlq"]
    groups = kctl("complete", "groups", "-X", f"bootstrap.servers={broker.bootstrap}", "--", "bill")
    assert groups.returncode == 0, groups.stderr
    assert groups.stdout.split() == ["billing", "billing-audit"]


def test_complete_is_silent_without_a_broker() -> None:
    done = kctl("complete", "topics", "-b", f"127.0.0.1:{free_port()}")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_complete_is_hidden_from_help_and_docs() -> None:
    assert " complete " not in kctl("--help").stdout
    assert not (REPO / "man" / "kctl-complete.1").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_topics_and_groups_from_the_broker(broker: Any, kctl_on_path: dict[str, str]) -> None:
    b = broker.bootstrap
    assert bash_complete(f"kctl topic describe -b {b} ord", kctl_on_path) == ["orders", "orders-dlq"]
    assert bash_complete(f"kctl consume --bootstrap-server {b} ", kctl_on_path) == [
        "__consumer_offsets",
        "orders",
        "orders-dlq",
        "payments",
    ]
    assert bash_complete(f"kctl group rewind -X bootstrap.servers={b} bi", kctl_on_path) == [
        "billing",
        "billing-audit",
    ]
    assert bash_complete(f"kctl consume -b {b} orders -g b", kctl_on_path) == ["billing", "billing-audit"]
    assert bash_complete(f"kctl topic create -b {b} ord", kctl_on_path) == []  # new names: nothing offered
    nobody = f"127.0.0.1:{free_port()}"
    assert bash_complete(f"kctl topic describe -b {nobody} ord", kctl_on_path) == []


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_topics_from_the_broker(broker: Any, kctl_on_path: dict[str, str]) -> None:
    script = REPO / "completions" / "kctl.fish"
    line = f"kctl topic delete -b {broker.bootstrap} pay"
    done = subprocess.run(
        ["fish", "--no-config", "-c", f"source '{script}'; complete -C '{line}'"],
        capture_output=True,
        text=True,
        env=kctl_on_path,
        timeout=60,
        check=True,
    )
    assert [row.split("\t")[0] for row in done.stdout.splitlines()] == ["payments"]

"""README.md's operator examples, run: the `sh` code blocks are parsed out of README.md, so the
README and the CLI cannot drift apart.

* `test_every_kctl_command_in_the_readme_exists`: every `kctl <group> <command>` written in any code
  block of README.md is a command of the CLI (`kctl <group> <command> --help` exits 0), whatever the
  section.
* `test_readme_example`: each line of the sections in `RUN` runs, as written, in bash (pipes, `seq`,
  `printf` and all), with `kctl` on PATH being this tree's CLI, against one broker this module shares
  (registered in a real ZooKeeper, so the ZooKeeper-consumer examples run too). The only rewrites,
  listed in `REWRITES`: the example addresses (127.0.0.1:9092, zk1:2181/kafka), the second log
  directory (/data2) and broker ids become the test's, the paths of the offline-tool examples point
  into a scratch log directory, optional `[...]` parts of synopsis lines are dropped, `T` is a
  topic, and each example gets topic and group names of its own
  (`orders` -> `orders-7`, `billing` -> `billing-7`, prepared with records and committed offsets)
  so that examples do not depend on each other's order; lines without `-b` reach the broker through
  KCTL_BOOTSTRAP_SERVER, except the ZooKeeper section's, which find it in ZooKeeper. A line passes
  when it exits 0, or the code its comment documents (`# exit 3: ...`). A line that reads until
  interrupted (`FOLLOWS`) is interrupted once it printed a record and must exit 130.
* `test_readme_cluster_block`: the Quick start's cluster block (`kctl cluster up/status/down` with a
  topic of replication factor 3), as one script.

What is not run says why: whole sections in `NOT_RUN`, single lines in `SKIP` (matched by the
start of the command). A section with `sh` blocks must be in one of `RUN`, `NOT_RUN` or be the Quick
start (`test_every_readme_section_is_classified`).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import make_batch

from kctl.testing import BrokerProcess, ZooKeeperServer

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TIMEOUT = 60.0

RUN = (
    "Broker",
    "Client quotas, producers and transactions",
    "Topics",
    "Produce and consume",
    "Local clusters",
    "Consumer groups",
    "ZooKeeper-coordinated consumers (the old high-level consumer)",
    "Named clusters",
    "Offline log tools (no broker needed)",
    "Shell completions and man pages",
)
"""The sections whose `sh` lines run against the shared broker (or, offline tools, against files)."""

NOT_RUN = {
    "Partitions: reassignment and leader election": "moves replicas between brokers 2, 3 and 4: "
    "tests/cluster/test_cluster_reassign.py and test_e2e_cluster_cli.py run them on clusters",
    "Security: TLS, SASL and ACLs": "needs certificates and a SASL_SSL listener at broker1.example.com: "
    "tests/*/test_e2e_security*.py",
    "Mirror maker: `kctl mirror`": "needs two or three clusters: tests/mirror/test_mirror_e2e.py",
    "Performance tests": "a million records each: a benchmark (tests/cli/test_cli_perf.py runs them small)",
    "Peers: kctl beside Apache Kafka (and Tansu)": "benchmarks against Apache Kafka",
    "Spark: the `kctl` data source and `kctl spark load`": "needs Spark: tests/e2e/test_spark_load.py",
    "Development": "runs the test suite and the benchmarks",
}
"""Sections whose examples this module does not run, and why."""

QUICK_START = "Quick start"
"""Its cluster block runs as one script (`test_readme_cluster_block`); `make run`/`make test` and the
kcat lines do not run here."""

SKIP = {
    ("Broker", "kctl broker start"): "starts a broker in the foreground or as a daemon in ./data: "
    "tests/cli/test_cli_broker.py",
    ("Broker", "kctl broker stop"): "stops the daemon of ./data: tests/cli/test_cli_broker.py",
    ("Broker", "curl -s http://127.0.0.1:9404/metrics"): "needs a broker started with metrics.listener: "
    "tests/broker/test_metrics_endpoint.py",
    ("Broker", "kctl top -b 127.0.0.1:9092 --interval"): "a live view until q is pressed: "
    "tests/cli/test_cli_top.py runs it under tmux",
    ("Broker", "kafka-configs.sh"): "Apache Kafka's tool: tests/e2e/test_kafka_cli_tools.py runs it "
    "against a broker",
    ("Local clusters", "kctl cluster up"): "the cluster's life cycle runs in test_readme_cluster_block",
    ("Local clusters", "kctl cluster status"): "the cluster's life cycle runs in test_readme_cluster_block",
    ("Local clusters", "kctl cluster down"): "the cluster's life cycle runs in test_readme_cluster_block",
    ("Local clusters", "kctl cluster start"): "a local cluster's life cycle: test_readme_cluster_block",
    ("Local clusters", "kctl cluster stop"): "a local cluster's life cycle: test_readme_cluster_block",
    ("Local clusters", "kctl cluster restart"): "a local cluster's life cycle: test_readme_cluster_block",
    (
        "Offline log tools (no broker needed)",
        "kctl log dump /data/my_topic_0/00000000000000001234.snapshot",
    ): ("names a producer snapshot at offset 1234: tests/cli/test_cli_log.py dumps one"),
    ("Offline log tools (no broker needed)", "kctl log dump /old-kafka/"): (
        "needs segments an old broker wrote: tests/records/test_records_legacy.py"
    ),
    ("Shell completions and man pages", "cp "): "installs into the user's shell configuration",
}
"""(section, start of the command line) -> why that line does not run here."""

FOLLOWS = (
    "kctl consume orders --group billing -o beginning",
    "kctl consume --pattern 'orders.*' -o -100",
    "kctl consume orders --group billing --zookeeper zk1:2181/kafka -o beginning",
)
"""Lines that read until interrupted: interrupted once they printed a record, exit 130 expected."""

REWRITES = (
    (r"127\.0\.0\.1:9092", "{bootstrap}"),
    (r"zk1:2181/kafka", "{zookeeper}"),
    (r"(?<![\w./-])/data2\b", "{data2}"),
    (r"--broker \d+", "--broker {broker_id}"),
    (r"(?<![\w./-])/data(?=/|\s|$)", "{offline}"),
    (r"(?<![\w$%./-])T(?![\w-])", "{topic}"),
    (r"(?<![\w$./-])orders(?![\w-])", "{topic}"),
    (r"(?<![\w$./-])billing(?![\w-])", "{group}"),
)
"""(pattern, replacement) applied to every line that runs (after `[...]` optional parts are dropped)."""


# -- README ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    section: str
    line_number: int
    command: str
    """The command line as README has it, continuation lines joined, the comment removed."""
    comment: str

    @property
    def expected_exit(self) -> int:
        match = re.match(r"exit (\d+)\b", self.comment)
        return int(match.group(1)) if match else 0

    @property
    def id(self) -> str:
        return f"{self.section.split(':')[0].split(' (')[0]}:{self.line_number}"


def _split_comment(line: str) -> tuple[str, str]:
    """(command, comment): a `#` that starts a word outside quotes begins the comment."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def code_blocks(text: str | None = None) -> Iterator[tuple[str, str, int, list[str]]]:
    """(section heading, language, line number of the first line, lines) of README's fenced blocks."""
    lines = (README.read_text(encoding="utf-8") if text is None else text).splitlines()
    section, index = "", 0
    while index < len(lines):
        line = lines[index]
        heading = re.match(r"^#{2,4} (.+)$", line)
        if heading:
            section = heading.group(1).strip()
        fence = re.match(r"^\s*```(\w*)\s*$", line)
        if fence:
            end = index + 1
            while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
                end += 1
            yield section, fence.group(1), index + 2, lines[index + 1 : end]
            index = end
        index += 1


def sh_examples(text: str | None = None) -> list[Example]:
    """Every command line of README's `sh` blocks."""
    examples = []
    for section, language, first, lines in code_blocks(text):
        if language != "sh":
            continue
        number, pending = 0, ""
        for offset, raw in enumerate(lines):
            if not pending:
                number = first + offset
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            command, comment = _split_comment(pending + raw)
            pending = ""
            if command.strip():
                examples.append(Example(section, number, " ".join(command.split()), comment))
    return examples


def kctl_command_lines(text: str | None = None) -> list[tuple[int, list[str]]]:
    """(README line, the words after `kctl`) of every `kctl` invocation in any code block."""
    import shlex

    found = []
    for _, _, first, lines in code_blocks(text):
        for offset, raw in enumerate(lines):
            command, _ = _split_comment(raw)
            for match in re.finditer(r"(?:^|[|;&(`]|\$\()\s*kctl\s+([^|;&)`]*)", command):
                try:
                    words = shlex.split(match.group(1))
                except ValueError:
                    words = match.group(1).split()
                found.append((first + offset, words))
    return found


def skip_reason(example: Example) -> str | None:
    for (section, start), reason in SKIP.items():
        if example.section == section and example.command.startswith(start):
            return reason
    return None


# -- the command tree ------------------------------------------------------------------------------
def command_paths(text: str | None = None) -> tuple[dict[tuple[str, ...], int], list[str]]:
    """The command paths (`("topic", "create")`) the `kctl` lines of README's code blocks name, each
    with a README line, and the lines that name no command of the CLI."""
    import typer.main

    from kctl.commands.app import ROOT_OPTIONS_WITH_VALUE, app

    root = typer.main.get_command(app)
    paths: dict[tuple[str, ...], int] = {}
    unknown = []
    for line, words in kctl_command_lines(text):
        command = root  # a click command (typer's own copy of click): groups have `commands`
        path: list[str] = []
        skip_value = flagged = False
        for word in words:
            if skip_value:
                skip_value = False
                continue
            if word.startswith("-"):
                if not path and word in ROOT_OPTIONS_WITH_VALUE:
                    skip_value = True
                    continue
                break
            subcommands = getattr(command, "commands", None)
            if subcommands is not None and word in subcommands:
                command = subcommands[word]
                path.append(word)
                continue
            if subcommands is not None and not getattr(command, "invoke_without_command", False):
                unknown.append(f"README line {line}: kctl {' '.join([*path, word])}: no such command")
                flagged = True
            break
        if not path and not flagged and words[:1] not in (["--version"], ["--help"], ["-h"]):
            unknown.append(f"README line {line}: `kctl {' '.join(words)}` names no command")
        paths.setdefault(tuple(path), line)
    return paths, unknown


def test_every_kctl_command_in_the_readme_exists(capsys: pytest.CaptureFixture[str]) -> None:
    """`kctl <group> [<command>...]` of every code block names commands the CLI has, and each
    answers `--help` with exit 0."""
    from kctl.__main__ import main

    paths, unknown = command_paths()
    assert unknown == []
    assert len(paths) > 40, "the README's commands were found"
    for path, line in sorted(paths.items()):
        code = main([*path, "--help"])
        capsys.readouterr()
        assert code == 0, f"README line {line}: kctl {' '.join(path)} --help exited {code}"


def test_a_command_the_cli_lacks_is_found() -> None:
    text = (
        "## S\n```sh\nB=$(kctl cluster up --brokers 3)\nkctl cluster frobnicate --dir D   # new?\n"
        "kctl --clusters f.toml topic list -b agg | kctl nosuch thing\nkctl consume orders -e\n```\n"
    )
    paths, unknown = command_paths(text)
    assert set(paths) == {("cluster", "up"), ("cluster",), ("topic", "list"), (), ("consume",)}
    assert unknown == [
        "README line 4: kctl cluster frobnicate: no such command",
        "README line 5: kctl nosuch: no such command",
    ]


def test_every_readme_section_is_classified() -> None:
    sections = {e.section for e in sh_examples()}
    unclassified = sections - set(RUN) - set(NOT_RUN) - {QUICK_START}
    assert unclassified == set(), "add each section to RUN or NOT_RUN (with the reason)"
    assert set(RUN) <= sections, "RUN names a section README does not have (renamed?)"


def test_the_parser_joins_continuations_and_reads_documented_exit_codes() -> None:
    text = "## S\n\n```sh\nkctl a \\\n    --b c   # exit 3: why\nkctl d '#not a comment'\n```\n"
    first, second = sh_examples(text)
    assert (first.command, first.expected_exit, first.line_number) == ("kctl a --b c", 3, 4)
    assert (second.command, second.expected_exit) == ("kctl d '#not a comment'", 0)


# -- the shared broker -----------------------------------------------------------------------------
@dataclass
class Shared:
    broker: BrokerProcess
    zookeeper: str
    data2: Path
    scratch: Path
    bin: Path


@pytest.fixture(scope="module")
def shared(
    zookeeper: ZooKeeperServer,
    module_broker_factory: Callable[..., BrokerProcess],
    tmp_path_factory: pytest.TempPathFactory,
) -> Shared:
    scratch = tmp_path_factory.mktemp("readme")
    data, data2 = scratch / "data1", scratch / "data2"
    connect = zookeeper.connect_string()
    broker = module_broker_factory(
        {
            "zookeeper.connect": connect,
            "log.dirs": f"{data},{data2}",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "8",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.num.partitions": "8",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "kctl"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m kctl "$@"\n')
    wrapper.chmod(0o755)
    _create_topics(
        broker.bootstrap, [t for i, e in enumerate(sh_examples()) if e.section in RUN for t in _topics(e, i)]
    )
    return Shared(broker, connect, data2, scratch, bin_dir)


def _topics(example: Example, index: int) -> list[tuple[str, int, int]]:
    """(name, partitions, records) of the topics an example needs: its own `orders`, and A and B."""
    words = set(re.findall(r"\w+", example.command))
    topics = [(f"orders-{index}", 6, 30)] if words & {"orders", "T", "billing"} else []
    return topics + [(name, 2, 30 if name == "A" else 0) for name in ("A", "B") if name in words]


def _create_topics(bootstrap: str, topics: list[tuple[str, int, int]]) -> None:
    """Every example's topics, made at once (one CreateTopics, one producer): keyed records."""
    from kctl.client import AdminClient, NewTopic, Producer

    topics = list(dict.fromkeys(topics))
    with AdminClient(bootstrap) as admin:
        for result in admin.create_topics([NewTopic(name, partitions, 1) for name, partitions, _ in topics]):
            assert result.ok, result
    with Producer(bootstrap, {"linger.ms": "5"}) as producer:
        for name, partitions, records in topics:
            for i in range(records):
                producer.send(name, f"v{i}".encode(), f"k{i}".encode(), partition=i % partitions)
        assert producer.flush(60) == 0


def _prepare(shared: Shared, example: Example, index: int, workdir: Path) -> dict[str, str]:
    """The group and files of one example (its topics are made by `shared`); the values of the
    REWRITES placeholders."""
    from kctl.client import AdminClient, TopicPartition
    from kctl.client.group import GroupAdmin
    from kctl.zk.consumer_registry import ConsumerRegistry

    topic, group = f"orders-{index}", f"billing-{index}"
    bootstrap = shared.broker.bootstrap
    # every line of the ZooKeeper section finds a group of its own under /consumers, whatever ran before
    # (`kctl zk tree /consumers` names no group, and tests may run in any order)
    zookeeper_group = "zookeeper" in example.section.lower()
    if "billing" in re.findall(r"\w+", example.command) or zookeeper_group:
        offsets = {TopicPartition(topic, p): 2 for p in range(6)}
        if zookeeper_group:
            with ConsumerRegistry(shared.zookeeper) as zk:
                for tp, offset in offsets.items():
                    zk.commit_offset(group, tp.topic, tp.partition, offset)
        else:
            with AdminClient(bootstrap) as admin:
                GroupAdmin(admin).alter_offsets(group, offsets)
    (workdir / "photo.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (workdir / "notes.pdf").write_bytes(b"%PDF-1.4 nor a pdf")
    clusters = f'[dc1]\nbootstrap.servers = "{bootstrap}"\n[agg]\nbootstrap.servers = "{bootstrap}"\n'
    (workdir / "clusters.toml").write_text(clusters)
    offline = workdir / "data"
    if example.section.startswith("Offline log tools"):
        _offline_log_dir(offline)
    return {
        "bootstrap": bootstrap,
        "zookeeper": shared.zookeeper,
        "data2": str(shared.data2),
        "broker_id": str(shared.broker.broker_id),
        "offline": str(offline),
        "topic": topic,
        "group": group,
    }


def _offline_log_dir(directory: Path) -> None:
    """A log directory as a stopped broker leaves it: my_topic_0 (three segments) and
    __consumer_offsets_7, written by kctl.log."""
    from kctl.common.topic_partition import TopicPartition
    from kctl.log.config import LogConfig
    from kctl.log.log import Log

    now = int(time.time() * 1000)
    batch = make_batch(10, timestamp=now)
    config = LogConfig().with_overrides({"segment.bytes": str(len(batch) * 4), "index.interval.bytes": "500"})
    for name, partition in (("my_topic", 0), ("__consumer_offsets", 7)):
        log = Log(
            directory / f"{name}_{partition}", TopicPartition(name, partition), config, needs_recovery=False
        )
        for i in range(12):
            log.append(make_batch(10, timestamp=now + i * 1000, start=i * 10))
        log.close()


def rewrite(command: str, values: dict[str, str]) -> str:
    while True:  # optional parts of synopsis lines, innermost first: [--topic T], [--execute [--wait 60]]
        dropped = re.sub(r"\s*\[[^\[\]]*\]", "", command)
        if dropped == command:
            break
        command = dropped
    for pattern, replacement in REWRITES:
        command = re.sub(pattern, replacement.format(**values).replace("\\", "\\\\"), command)
    return command


def _environment(shared: Shared, example: Example, workdir: Path, values: dict[str, str]) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
    environment.update(
        PATH=f"{shared.bin}{os.pathsep}{environment.get('PATH', '')}",
        HOME=str(workdir / "home"),
        XDG_CONFIG_HOME=str(workdir / "home" / ".config"),
        COLUMNS="200",
        PAGER="cat",
        MANPAGER="cat",
    )
    if "zookeeper" not in example.section.lower():  # ZooKeeper-mode commands find the brokers there
        environment["KCTL_BOOTSTRAP_SERVER"] = values["bootstrap"]
    if example.section == "Named clusters":
        environment["KCTL_CLUSTERS"] = str(workdir / "clusters.toml")
    return environment


def _params() -> list[object]:
    params: list[object] = []
    for index, example in enumerate(sh_examples()):
        if example.section not in RUN:
            continue
        reason = skip_reason(example)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(index, example, id=example.id, marks=marks))
    return params


@pytest.mark.parametrize(("index", "example"), _params())
def test_readme_example(shared: Shared, tmp_path: Path, index: int, example: Example) -> None:
    workdir = tmp_path / "work"
    (workdir / "home").mkdir(parents=True)
    values = _prepare(shared, example, index, workdir)
    command = rewrite(example.command, values)
    environment = _environment(shared, example, workdir, values)
    argv = ["bash", "-o", "pipefail", "-c", command]
    if example.section == "Shell completions and man pages":
        workdir = REPO  # completions/ is the repository's
    where = f"README line {example.line_number}: {example.command}\nran: {command}"
    if any(example.command.startswith(f) for f in FOLLOWS):
        process = subprocess.Popen(
            argv, cwd=workdir, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            ready, _, _ = select.select([process.stdout], [], [], TIMEOUT)
            first = process.stdout.readline() if ready else ""
            assert first, f"{where}\nprinted nothing: {process.stderr.read() if process.stderr else ''}"
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches every process of the line
            _, stderr = process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        assert process.returncode == 130, f"{where}\nexit {process.returncode}\n{stderr}"
        return
    result = subprocess.run(
        argv, cwd=workdir, env=environment, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert result.returncode == example.expected_exit, (
        f"{where}\nexit {result.returncode}, expected {example.expected_exit}\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr, where


# -- the Quick start cluster -----------------------------------------------------------------------
def _cluster_block() -> tuple[int, list[str]]:
    for section, language, first, lines in code_blocks():
        if section == QUICK_START and language == "sh" and any("kctl cluster up" in line for line in lines):
            return first, lines
    raise AssertionError("README's Quick start has no `kctl cluster up` block")


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.zk
def test_readme_cluster_block(tmp_path: Path) -> None:
    """The Quick start's cluster: ZooKeeper and three brokers in ./kctl-cluster, a topic of replication
    factor 3, status, and down — the block as one bash script, each command checked (`set -e`)."""
    if shutil.which("java") is None or not Path("/usr/share/java/zookeeper.jar").exists():
        pytest.fail("the cluster block needs java and Debian's zookeeper package (make system-deps)")
    first, lines = _cluster_block()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kctl").write_text(f'#!/bin/sh\nexec {sys.executable} -m kctl "$@"\n')
    (bin_dir / "kctl").chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
    environment["PATH"] = f"{bin_dir}{os.pathsep}{environment.get('PATH', '')}"
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    try:
        result = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=240
        )
        assert result.returncode == 0, f"README line {first}:\n{script}\n{result.stderr}"
        status = json.loads(
            subprocess.run(
                ["kctl", "cluster", "status", "-f", "json"], cwd=tmp_path, env=environment,
                capture_output=True, text=True, timeout=TIMEOUT,
            ).stdout or "null"
        )  # fmt: skip
        assert status is None or not any(p.get("alive") for p in _processes(status)), (
            "down stopped everything"
        )
    finally:
        if (tmp_path / "kctl-cluster" / "cluster.json").exists():
            subprocess.run(
                ["kctl", "cluster", "down"], cwd=tmp_path, env=environment, capture_output=True, timeout=120
            )


def _processes(status: object) -> list[dict[str, object]]:
    if isinstance(status, list):
        return [p for p in status if isinstance(p, dict)]
    if isinstance(status, dict):
        return [
            p for value in status.values() if isinstance(value, list) for p in value if isinstance(p, dict)
        ]
    return []

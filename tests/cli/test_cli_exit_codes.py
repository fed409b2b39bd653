"""Every exit code README.md's exit-code table documents, run through the real `kctl` CLI.

The codes come from the table itself (the `### Exit codes` section of README.md), so README and
this test cannot drift: every code the table lists must have at least one scenario here
(`test_every_documented_exit_code_has_a_scenario` fails otherwise), every scenario's code must be
in the table, and the table must be `kctl.commands.errors.ExitCode`. Each scenario runs `python -m
kctl` as a user does, against one broker this module shares (a PLAINTEXT listener and a
SASL_PLAINTEXT one with PLAIN, for "authentication failed"), or against nothing at all.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from raw_kafka import unique

from kctl.commands.errors import ExitCode
from kctl.testing import BrokerProcess

README = Path(__file__).resolve().parents[2] / "README.md"
ADMIN_PASSWORD = "admin-secret"
TIMEOUT = 60.0


def documented_exit_codes(text: str | None = None) -> dict[int, str]:
    """code -> meaning, from the table under README's `### Exit codes` heading."""
    text = README.read_text(encoding="utf-8") if text is None else text
    match = re.search(r"^### Exit codes\n(.*?)(?=^#)", text, re.MULTILINE | re.DOTALL)
    assert match is not None, "README.md has no '### Exit codes' section"
    codes = {}
    for line in match.group(1).splitlines():
        row = re.match(r"^\|\s*(\d+)\s*\|(.*)\|\s*$", line)
        if row:
            codes[int(row.group(1))] = row.group(2).strip()
    assert codes, "the exit-code section has no table rows"
    return codes


# -- the shared broker and the ways to run kctl ----------------------------------------------------
@dataclass
class Env:
    plaintext: str
    sasl: str
    tmp: Path
    topic: str


@pytest.fixture(scope="module")
def env(module_broker_factory: Callable[..., BrokerProcess], tmp_path_factory: pytest.TempPathFactory) -> Env:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}";'
    )
    broker = module_broker_factory(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "num.partitions": "1",
        }
    )
    plaintext, sasl = broker.addresses
    topic = unique("exit")
    produced = kctl("produce", topic, "-b", plaintext, input="".join(f"r{i}\n" for i in range(2000)))
    assert produced.returncode == 0, produced.stderr
    return Env(plaintext, sasl, tmp_path_factory.mktemp("exit-codes"), topic)


def kctl(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        input=input,
        env={**environment, "COLUMNS": "200"},
    )


@contextlib.contextmanager
def following(env: Env) -> Iterator[subprocess.Popen[str]]:
    """`kctl consume TOPIC -o beginning -f raw` (no end: it follows), once it printed a record."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kctl",
            "consume",
            env.topic,
            "-o",
            "beginning",
            "-f",
            "raw",
            "-b",
            env.plaintext,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "r0\n", "the consumer is running"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=TIMEOUT)


# -- the scenarios ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    code: int
    stderr: str


@dataclass(frozen=True)
class Scenario:
    code: int
    name: str
    run: Callable[[Env], Outcome]
    says: tuple[str, ...] = field(default=())
    """Text the diagnostics (stderr) must contain."""


def command(*argv: str, input: str | None = None) -> Callable[[Env], Outcome]:
    """A plain command line; {plaintext}, {sasl}, {tmp} and {topic} are the module's."""

    def run(env: Env) -> Outcome:
        args = [a.format(plaintext=env.plaintext, sasl=env.sasl, tmp=env.tmp, topic=env.topic) for a in argv]
        result = kctl(*args, input=input)
        return Outcome(result.returncode, result.stderr)

    return run


def interrupted(sig: signal.Signals) -> Callable[[Env], Outcome]:
    def run(env: Env) -> Outcome:
        with following(env) as process:
            process.send_signal(sig)
            _, stderr = process.communicate(timeout=TIMEOUT)
            return Outcome(process.returncode, stderr)

    return run


def stdout_closed_early(env: Env) -> Outcome:
    """`kctl consume … | head -1`: the reader goes away after one line."""
    with following(env) as process:
        assert process.stdout is not None
        process.stdout.close()
        process.wait(timeout=TIMEOUT)
        assert process.stderr is not None
        return Outcome(process.returncode, process.stderr.read())


def corrupt_partition(env: Env) -> Outcome:
    partition = env.tmp / "corrupt_0"
    partition.mkdir(exist_ok=True)
    (partition / "00000000000000000000.log").write_bytes(b"\xc6" * 200)  # magic -58: not a batch
    return command("log", "verify", str(partition))(env)


SASL = ("-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=admin")
SCENARIOS = [
    Scenario(0, "success", command("topic", "list", "-b", "{plaintext}")),
    Scenario(
        0,
        "authenticated",
        command("topic", "list", "-b", "{sasl}", *SASL, "-X", f"sasl.password={ADMIN_PASSWORD}"),
    ),
    Scenario(0, "stdout closed early (| head)", stdout_closed_early),
    Scenario(1, "corruption found", corrupt_partition, ("problem(s) found",)),
    Scenario(
        1,
        "an operation failed",
        command("topic", "create", "{topic}", "-b", "{plaintext}"),
        ("TOPIC_ALREADY_EXISTS",),
    ),
    Scenario(
        1,
        "authentication failed",
        command("topic", "list", "-b", "{sasl}", *SASL, "-X", "sasl.password=wrong"),
        ("authentication failed", "SASL/PLAIN", "User:admin"),
    ),
    Scenario(2, "unknown option", command("topic", "list", "--no-such-option"), ("No such option",)),
    Scenario(
        2,
        "bad value",
        command("consume", "{topic}", "-o", "sideways", "-b", "{plaintext}"),
        ("invalid --offset",),
    ),
    Scenario(
        2,
        "unknown configuration key",
        command("topic", "list", "-X", "no.such.key=1", "-b", "{plaintext}"),
        ("no.such.key",),
    ),
    Scenario(
        3, "missing topic", command("consume", "no-such-topic", "-e", "-b", "{plaintext}"), ("no-such-topic",)
    ),
    Scenario(
        3, "broker unreachable", command("topic", "list", "-b", "127.0.0.1:1"), ("cannot reach any broker",)
    ),
    Scenario(3, "missing directory", command("log", "verify", "{tmp}/no-such-dir"), ("no-such-dir",)),
    Scenario(
        3,
        "missing --config file",
        command("topic", "list", "-c", "{tmp}/nope.properties"),
        ("config file not found",),
    ),
    Scenario(
        3,
        "missing clusters file",
        command("--clusters", "{tmp}/nope.toml", "topic", "list", "-b", "dc1"),
        ("clusters file not found",),
    ),
    Scenario(130, "interrupted (Ctrl-C)", interrupted(signal.SIGINT)),
    Scenario(143, "stopped by SIGTERM", interrupted(signal.SIGTERM)),
]


def test_every_documented_exit_code_has_a_scenario() -> None:
    documented = documented_exit_codes()
    covered = {s.code for s in SCENARIOS}
    assert sorted(set(documented) - covered) == [], "README documents exit codes no scenario here runs"
    assert sorted(covered - set(documented)) == [], "scenarios of exit codes README does not document"
    assert sorted(documented) == sorted(int(code) for code in ExitCode), "README's table is ExitCode"


def test_the_table_parser_sees_a_new_row() -> None:
    """A code added to README's table is seen (and would then need a scenario)."""
    text = README.read_text(encoding="utf-8")
    added = text.replace("| 130 | interrupted", "| 4 | something new |\n| 130 | interrupted", 1)
    assert set(documented_exit_codes(added)) - set(documented_exit_codes(text)) == {4}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"{s.code}-{s.name}")
def test_documented_exit_code(env: Env, scenario: Scenario) -> None:
    assert scenario.code in documented_exit_codes()
    outcome = scenario.run(env)
    assert outcome.code == scenario.code, f"{scenario.name}: exit {outcome.code}\n{outcome.stderr}"
    for text in scenario.says:
        assert text in outcome.stderr, f"{scenario.name}: {text!r} not in {outcome.stderr!r}"
    assert "Traceback" not in outcome.stderr

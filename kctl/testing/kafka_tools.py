"""Apache Kafka's own command-line tools (kafka-topics, kafka-configs, kafka-consumer-groups, the
console producer and consumer, ...) run from Kafka's jars against a kctl broker, as a test client.

`KafkaTools` maps each script name of Kafka 3.9's ``bin/`` to the main class that script runs
(`TOOL_CLASSES`) and runs it with `kctl.testing.kafka_dist.kafka_java`, answering a `ToolResult`
(returncode, stdout, stderr). The pytest plugin's ``kafka_tool`` fixture hands tests one instance;
when the jars cannot be resolved (no Java, no Maven, Maven Central unreachable) it skips with the
reason, so the skip and why show in the test summary.

Each run starts a JVM (a second or two on a small machine): tests should keep invocations few.

``python -m kctl.testing.kafka_tools`` resolves the jars ahead of the tests (``make test`` does) and
says why when it cannot; with ``KCTL_REQUIRE_KAFKA_TOOLS=1`` the fixture fails instead of skipping.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from kctl.localcluster import guard
from kctl.testing.kafka_dist import KAFKA_VERSION, KafkaJarsUnavailable, kafka_java, kafka_libs

#: script name in Kafka 3.9's bin/ -> the main class it runs (kafka-run-class.sh)
TOOL_CLASSES: Mapping[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-acls": "kafka.admin.AclCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-broker-api-versions": "kafka.admin.BrokerApiVersionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-replica-verification": "org.apache.kafka.tools.ReplicaVerificationTool",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    # not a bin/ script: the copier of Kafka's own exactly-once system tests (kafka-run-class.sh)
    "transactional-message-copier": "org.apache.kafka.tools.TransactionalMessageCopier",
}

DEFAULT_TIMEOUT_S = 120.0
#: the JVM's own warnings to stderr (HotSpot prints them on stdout, where tests parse the tool's
#: output), and no hsperfdata file in /tmp (whose absence or a full /tmp only makes such warnings)
JVM_OPTIONS = ("-XX:+DisplayVMOutputToStderr", "-XX:-UsePerfData")
#: set (to anything but "" or "0") to make the ``kafka_tool`` fixture fail rather than skip without jars
REQUIRE_ENV = "KCTL_REQUIRE_KAFKA_TOOLS"


def required() -> bool:
    """Whether missing jars must fail the tests that need them (`REQUIRE_ENV`)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


@dataclass(frozen=True)
class ToolResult:
    """One finished run of a Kafka tool."""

    tool: str
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        """The command, its exit code and its output, for assertion messages."""
        return (
            f"{self.tool} {' '.join(self.args)} -> exit {self.returncode}\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )

    def check(self) -> ToolResult:
        """This result if the tool exited 0; otherwise an AssertionError carrying its output."""
        if self.returncode != 0:
            raise AssertionError(self.describe())
        return self

    @property
    def lines(self) -> list[str]:
        """stdout's non-empty lines."""
        return [line for line in self.stdout.splitlines() if line.strip()]


class KafkaTools:
    """Runs Kafka's tools by script name: ``tools("kafka-topics", "--bootstrap-server", b, "--list")``.

    Constructing one resolves the jars (`kafka_libs`), raising `KafkaJarsUnavailable` with the reason
    when they cannot be had."""

    def __init__(self, version: str = KAFKA_VERSION) -> None:
        self.version = version
        self.libs = kafka_libs(version)

    def command(self, tool: str, *args: str) -> list[str]:
        """The command line running `tool` (a script name of `TOOL_CLASSES`) with `args`."""
        try:
            main_class = TOOL_CLASSES[tool]
        except KeyError:
            raise ValueError(
                f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOL_CLASSES))}"
            ) from None
        java, *rest = kafka_java(main_class, *args, version=self.version)
        return [java, *JVM_OPTIONS, *rest]

    def __call__(
        self,
        tool: str,
        *args: str,
        input: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> ToolResult:
        """Run `tool` to its end (stdin is `input`, or empty) and answer its exit code and output."""
        guard.check("e2e", f"Apache Kafka's {tool}")
        command = self.command(tool, *args)
        result = subprocess.run(
            command,
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "KAFKA_HEAP_OPTS": ""},
        )
        return ToolResult(tool, tuple(args), result.returncode, result.stdout, result.stderr)


def main() -> int:
    """Resolve the jars now (a Makefile step before the tests): 0 and their directory, or 1 and why."""
    try:
        libs = kafka_libs()
    except KafkaJarsUnavailable as error:
        print(
            f"WARNING: Apache Kafka {KAFKA_VERSION}'s jars are unavailable: {error}\n"
            "WARNING: the tests running Kafka's own tools (tests/e2e/test_kafka_cli_tools.py) are skipped",
            file=sys.stderr,
        )
        return 1
    print(f"Apache Kafka {KAFKA_VERSION}'s tools: {libs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

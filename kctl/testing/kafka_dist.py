"""Apache Kafka's own jars as an independent peer for tests and benchmarks: resolved from Maven Central
with Maven into a cache directory, once per machine.

`kafka_libs()` answers the directory holding ``org.apache.kafka:kafka_2.13`` (the broker, KRaft mode),
``kafka-tools`` (kafka-topics, kafka-configs, kafka-consumer-groups, console producer and consumer, ...)
and their runtime dependencies; `kafka_java()` runs one of their main classes. Nothing in kctl's
product path uses this module: Kafka's tools are a test client and Kafka's broker a benchmark peer.

The cache is ``$KCTL_KAFKA_CACHE`` or ``~/.cache/kctl/kafka-<version>``. When Maven or Maven Central
cannot be reached, `KafkaJarsUnavailable` says why, so a fixture can skip loudly with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

KAFKA_VERSION = "3.9.0"
SLF4J_VERSION = "1.7.36"
RESOLVE_TIMEOUT_S = 900.0

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kctl.testing</groupId>
  <artifactId>kafka-peer</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId>
      <version>{kafka}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId>
      <version>{slf4j}</version></dependency>
  </dependencies>
</project>
"""

_LOG4J = """log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


_MM2_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kctl.testing</groupId>
  <artifactId>mirror-maker-peer</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror</artifactId>
      <version>{kafka}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId>
      <version>{slf4j}</version></dependency>
  </dependencies>
</project>
"""


class KafkaJarsUnavailable(RuntimeError):
    """Kafka's jars could not be resolved (no Maven, no Java, or Maven Central unreachable)."""


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    """Where the jars of `version` are kept."""
    root = os.environ.get("KCTL_KAFKA_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "kctl"
    return base / f"kafka-{version}"


def kafka_libs(version: str = KAFKA_VERSION) -> Path:
    """The directory of Kafka's jars (resolving them with Maven on first use)."""
    pom = _POM.format(kafka=version, slf4j=SLF4J_VERSION)
    return _resolve(cache_dir(version), pom, f"kafka_2.13-{version}.jar", version)


def mirror_maker_libs(version: str = KAFKA_VERSION) -> Path:
    """The directory of MirrorMaker 2's jars, ``org.apache.kafka:connect-mirror`` and its runtime
    dependencies with slf4j-reload4j (resolved with Maven on first use, beside Kafka's:
    ``<cache>/connect-mirror-<version>``); main class ``org.apache.kafka.connect.mirror.MirrorMaker``."""
    directory = cache_dir(version).with_name(f"connect-mirror-{version}")
    pom = _MM2_POM.format(kafka=version, slf4j=SLF4J_VERSION)
    return _resolve(directory, pom, f"connect-mirror-{version}.jar", version)


def _resolve(directory: Path, pom_text: str, marker: str, version: str) -> Path:
    """``directory/libs`` holding the runtime dependencies of ``pom_text`` (``marker``: a jar that is
    there once they were resolved)."""
    libs = directory / "libs"
    done = directory / ".resolved"
    if done.exists() and any(libs.glob(marker)):
        return libs
    if shutil.which("java") is None:
        raise KafkaJarsUnavailable("no java on PATH (scripts/install-system-deps.sh installs one)")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaJarsUnavailable("no mvn on PATH (scripts/install-system-deps.sh installs maven)")
    directory.mkdir(parents=True, exist_ok=True)
    pom = directory / "pom.xml"
    pom.write_text(pom_text)
    command = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={libs}", "-DincludeScope=runtime",
    ]  # fmt: skip
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise KafkaJarsUnavailable(f"resolving Kafka {version} from Maven Central timed out") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise KafkaJarsUnavailable(f"mvn could not resolve Kafka {version} from Maven Central:\n{tail}")
    (directory / "log4j.properties").write_text(_LOG4J)
    done.write_text(version)
    return libs


def kafka_java(main_class: str, *args: str, version: str = KAFKA_VERSION, heap: str = "256m") -> list[str]:
    """The command line that runs `main_class` of Kafka's jars with `args`."""
    libs = kafka_libs(version)
    classpath = ":".join(str(jar) for jar in sorted(libs.glob("*.jar")))
    log4j = libs.parent / "log4j.properties"
    return [
        "java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
        f"-Dlog4j.configuration=file:{log4j}", "-cp", classpath, main_class, *args,
    ]  # fmt: skip

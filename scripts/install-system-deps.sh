#!/usr/bin/env bash
# Installs the Debian packages the tests use (a real ZooKeeper server, kcat, a Java runtime, Maven,
# Prometheus, tmux) when missing.
set -euo pipefail
need=()
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need+=(kcat)
java_major() { java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]; exit}'; }
if ! command -v java >/dev/null 2>&1; then need+=(default-jre-headless)      # Debian 12: OpenJDK 17
elif [ "$(java_major)" -lt 17 ] 2>/dev/null; then need+=(openjdk-17-jre-headless)  # Spark 4 needs 17+
fi
command -v zsh >/dev/null 2>&1 || need+=(zsh)
command -v fish >/dev/null 2>&1 || need+=(fish)
command -v mvn >/dev/null 2>&1 || need+=(maven)   # resolves Apache Kafka's jars, a test client and benchmark peer
command -v tmux >/dev/null 2>&1 || need+=(tmux)   # kctl top's live view, driven as a person would (tests/cli/test_cli_top.py)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)   # a real Prometheus scraping brokers' /metrics (tests/cluster/test_prometheus.py)
command -v ip >/dev/null 2>&1 || need+=(iproute2)   # network namespaces for the partition nemesis (tests/cluster/test_jepsen_network.py)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing system packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2

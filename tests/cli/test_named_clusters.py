"""Named clusters: the clusters file (location, format, errors), `-b NAME` on commands (resolved to
the file's bootstrap servers and client properties, below --config and -X), and `kctl cluster list`;
end to end against a real broker by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from raw_kafka import running_broker, unique

from kctl.client.clusters_file import (
    CLUSTERS_ENV,
    ClustersFileError,
    default_clusters_path,
    load_clusters,
    parse_clusters,
    resolve_cluster,
)
from kctl.testing import BrokerProcess

FILE = """
[dc1]
bootstrap.servers = "10.0.0.1:9092,10.0.0.2:9092"
"request.timeout.ms" = 5000
client.id = "mirror"

[agg]
"bootstrap.servers" = "10.9.0.1:9092"
sasl.password = "s3cret"
enable.idempotence = true
"""


def kctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("KCTL_BOOTSTRAP_SERVER", CLUSTERS_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environment, "COLUMNS": "200", **(env or {})},
    )


def test_parse_flattens_dotted_keys_into_kafka_names() -> None:
    clusters = parse_clusters(FILE)
    assert clusters["dc1"].bootstrap_servers == "10.0.0.1:9092,10.0.0.2:9092"
    assert clusters["dc1"].properties == {"request.timeout.ms": "5000", "client.id": "mirror"}
    assert clusters["agg"].properties == {"sasl.password": "s3cret", "enable.idempotence": "true"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[dc1]\nclient.id = 'x'\n", "has no bootstrap.servers"),
        ("[dc1\n", "clusters.toml"),
        ("dc1 = 'x'\n", "must be a table"),
    ],
)
def test_parse_errors_name_the_file(text: str, message: str) -> None:
    with pytest.raises(ClustersFileError, match=message):
        parse_clusters(text, Path("/etc/clusters.toml"))


def test_location_env_and_explicit_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(CLUSTERS_ENV, raising=False)
    assert default_clusters_path() == tmp_path / "xdg" / "kctl" / "clusters.toml"
    assert load_clusters().path is None  # a missing default file is no clusters
    default = tmp_path / "xdg" / "kctl" / "clusters.toml"
    default.parent.mkdir(parents=True)
    default.write_text("[home]\nbootstrap.servers = 'h:1'\n")
    assert load_clusters().names() == ["home"]
    other = tmp_path / "other.toml"
    other.write_text(FILE)
    monkeypatch.setenv(CLUSTERS_ENV, str(other))
    assert load_clusters().names() == ["agg", "dc1"]
    assert load_clusters(default).names() == ["home"]  # --clusters wins over the environment
    with pytest.raises(ClustersFileError, match="not found"):
        load_clusters(tmp_path / "missing.toml")
    assert resolve_cluster("dc1") is not None
    assert resolve_cluster("127.0.0.1:9092") is None  # a bootstrap list is never looked up
    assert resolve_cluster("unknown-host") is None  # not a name of the file: a host name


def test_cluster_list_and_config_show_by_name(tmp_path: Path) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text(FILE)
    listed = kctl("cluster", "list", "--clusters", str(path), "-f", "json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [r["name"] for r in rows] == ["agg", "dc1"]
    assert rows[0]["properties"]["sasl.password"] == "[hidden]"
    assert rows[1]["bootstrap_servers"] == "10.0.0.1:9092,10.0.0.2:9092"
    by_env = kctl("cluster", "list", env={CLUSTERS_ENV: str(path)})
    assert by_env.returncode == 0 and "dc1" in by_env.stdout and "s3cret" not in by_env.stdout
    shown = kctl(
        "--clusters", str(path), "config", "show", "-b", "dc1", "-X", "client.id=override", "-f", "json"
    )
    assert shown.returncode == 0, shown.stderr
    values = {e["key"]: (e["value"], e["source"]) for e in json.loads(shown.stdout)}
    assert values["bootstrap.servers"][0] == "10.0.0.1:9092,10.0.0.2:9092"
    assert values["request.timeout.ms"] == ("5000", "clusters")
    assert values["client.id"] == ("override", "-X")  # -X wins over the named cluster's properties
    missing = kctl("cluster", "list", "--clusters", str(tmp_path / "nope.toml"))
    assert missing.returncode == 3 and "not found" in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[dc1]\n")
    invalid = kctl("--clusters", str(bad), "topic", "list", "-b", "dc1")
    assert invalid.returncode == 2 and "bootstrap.servers" in invalid.stderr


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(["--clusters", "{missing}", "topic", "list", "-b", "dc1"], id="--clusters"),
        pytest.param(["topic", "list", "-b", "dc1"], id="KCTL_CLUSTERS"),
        pytest.param(["mirror", "--from", "dc1", "--to", "agg", "--clusters", "{missing}"], id="mirror"),
    ],
)
def test_a_missing_named_clusters_file_exits_3_as_a_missing_config_file(
    tmp_path: Path, how: list[str]
) -> None:
    missing = str(tmp_path / "nope.toml")
    result = kctl(*(arg.format(missing=missing) for arg in how), env={CLUSTERS_ENV: missing})
    assert result.returncode == 3, (result.returncode, result.stderr)
    assert f"clusters file not found: {missing}" in result.stderr


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, {"num.partitions": "2"}, "named") as process:
        yield process


def test_commands_reach_a_broker_by_name(broker: BrokerProcess, tmp_path: Path) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text(f"[local]\nbootstrap.servers = '{broker.bootstrap}'\n'client.id' = 'by-name'\n")
    env = {CLUSTERS_ENV: str(path)}
    topic = unique("named")
    created = kctl("topic", "create", topic, "-p", "2", "-b", "local", env=env)
    assert created.returncode == 0, created.stderr
    produced = subprocess.run(
        [sys.executable, "-m", "kctl", "produce", topic, "-b", "local"],
        input="a\nb\nc\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert produced.returncode == 0, produced.stderr
    consumed = kctl("consume", topic, "-b", "local", "--until", "end", "-f", "jsonl", env=env)
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(json.loads(line)["value"] for line in consumed.stdout.splitlines()) == ["a", "b", "c"]
    by_env_bootstrap = kctl("topic", "list", env={**env, "KCTL_BOOTSTRAP_SERVER": "local"})
    assert by_env_bootstrap.returncode == 0 and topic in by_env_bootstrap.stdout

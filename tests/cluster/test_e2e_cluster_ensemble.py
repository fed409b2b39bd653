"""`kctl cluster up --zookeepers 3`: a local cluster on a 3-server ZooKeeper ensemble in quorum
mode. Status shows each server; a killed ZooKeeper server (the ensemble's leader) does not stop the
brokers from serving, `cluster start` starts it again with the recorded quorum ports and it rejoins;
`cluster down` stops every process. A cluster.json written before ensembles still loads."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from cli_support import kctl as run_kctl

from kctl.localcluster.launcher import load_state, process_alive
from kctl.localcluster.state import ClusterState
from kctl.localcluster.zookeeper import four_letter_word
from kctl.testing import create_topic, produce, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.zk, pytest.mark.slow]


def test_a_cluster_on_an_ensemble_survives_its_zookeeper_leader(tmp_path: Path) -> None:
    directory, env = tmp_path / "kctl-cluster", {"KCTL_STATE_DIR": str(tmp_path / "state")}

    def cluster(*args: str) -> object:
        return run_kctl("cluster", *args, "--dir", str(directory), env=env, timeout=300)

    up = cluster("up", "--brokers", "2", "--zookeepers", "3", "-X", "offsets.topic.replication.factor=2")
    assert up.returncode == 0, up.stderr
    bootstrap = up.stdout.strip()
    try:
        state = load_state(directory)
        assert [z.server_id for z in state.zookeepers] == [1, 2, 3]
        assert state.zookeeper_connect.count(",") == 2 and state.zookeeper_connect.endswith("/kctl")
        shown = cluster("status", "-f", "json")
        assert shown.returncode == 0, shown.stderr
        rows = json.loads(shown.stdout)
        assert [(r["role"], r["server_id"], r["alive"]) for r in rows[:3]] == [
            ("zookeeper", 1, True),
            ("zookeeper", 2, True),
            ("zookeeper", 3, True),
        ]
        modes = {z.server_id: four_letter_word(z.port, "srvr") for z in state.zookeepers}
        [leader] = [z for z in state.zookeepers if "Mode: leader" in modes[z.server_id]]

        os.kill(leader.pid, signal.SIGKILL)
        wait_for(lambda: not process_alive(leader.pid), f"ZooKeeper {leader.server_id} to go", 10)
        create_topic(bootstrap, "after-zk-leader", partitions=2, replication_factor=2)
        produce(bootstrap, "after-zk-leader", [b"a", b"b"])
        down_one = cluster("status")
        assert down_one.returncode == 1 and f"not running: ZooKeeper {leader.server_id}" in down_one.stderr

        again = cluster("start")
        assert again.returncode == 0, again.stderr
        assert f"ZooKeeper {leader.server_id}" in again.stderr
        restarted = load_state(directory).zookeepers[leader.server_id - 1]
        assert restarted.pid != leader.pid and process_alive(restarted.pid)
        assert "Mode: follower" in four_letter_word(restarted.port, "srvr")
    finally:
        down = cluster("down")
    assert down.returncode == 0, down.stderr
    assert not any(process_alive(z.pid) for z in load_state(directory).zookeepers)


def test_a_state_file_from_before_ensembles_loads() -> None:
    legacy = {
        "directory": "/tmp/c",
        "zookeeper_connect": "127.0.0.1:2181/kctl",
        "zookeeper": {"role": "zookeeper", "pid": 7, "host": "127.0.0.1", "port": 2181, "log_file": "z"},
        "brokers": [
            {"role": "broker", "pid": 8, "host": "127.0.0.1", "port": 9092, "log_file": "b", "broker_id": 1}
        ],
    }
    state = ClusterState.from_json(json.dumps(legacy))
    [server] = state.zookeepers
    assert (server.name, server.port, server.server_id) == ("ZooKeeper", 2181, None)
    assert state.zookeeper_config(server) == Path("/tmp/c/zookeeper/zoo.cfg")
    assert ClusterState.from_json(state.to_json()) == state

"""`kctl cluster health` (as rpk cluster health) against a real 3-broker cluster: healthy (exit 0),
then with a follower killed — the broker named down and its partitions under-replicated (exit 1) —
then `--watch` waiting through its restart until healthy again (exit 0)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from cli_support import kctl

from kctl.testing import LocalCluster, create_topic, wait_for
from kctl.testing.cluster_view import ClusterView
from kctl.testing.pytest_plugin import ClusterFactory

PROPERTIES = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "3000"}


def test_health_names_a_dead_broker_and_waits_for_its_return(local_cluster_factory: ClusterFactory) -> None:
    cluster: LocalCluster = local_cluster_factory(3, PROPERTIES)
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "health", partitions=3, replication_factor=3)
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_full_isr("health", 3)
        healthy = kctl("cluster", "health", "-b", bootstrap, "-f", "json")
        assert healthy.returncode == 0, healthy.stderr
        document = json.loads(healthy.stdout)
        assert document["healthy"] is True and document["unhealthy_reasons"] == []
        assert document["live_brokers"] == [1, 2, 3] and document["controller_id"] in (1, 2, 3)

        controller = document["controller_id"]
        victim = next(b for b in (1, 2, 3) if b != controller)
        cluster.kill(victim)
        view.wait_for_deregistered(victim)
        alive = ",".join(cluster.broker(b).bootstrap for b in (1, 2, 3) if b != victim)

        def unhealthy() -> dict | None:
            # every live broker's answer (each learns of the death from its own ZooKeeper watch)
            answers = []
            for b in (1, 2, 3):
                if b == victim:
                    continue
                result = kctl("cluster", "health", "-b", cluster.broker(b).bootstrap, "-f", "json")
                answer = json.loads(result.stdout)
                if result.returncode != 1 or not answer["under_replicated_partitions"]:
                    return None
                if answer["brokers_down"] != [victim]:
                    return None
                answers.append(answer)
            return answers[0]

        answer = wait_for(unhealthy, f"health to see broker {victim} gone", 60)
        assert answer["brokers_down"] == [victim]
        assert f"brokers down: {victim}" in answer["unhealthy_reasons"]
        assert set(answer["under_replicated_partitions"]) >= {"health/0", "health/1", "health/2"}
        table = kctl("cluster", "health", "-b", alive)
        assert table.returncode == 1 and "unhealthy: brokers down" in table.stderr

        command = ["cluster", "health", "-b", alive, "--watch", "--timeout", "90", "-f", "json"]
        watching = subprocess.Popen(
            [sys.executable, "-m", "kctl", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert watching.stderr is not None and watching.stdout is not None
        said: list[str] = []
        waiting = threading.Event()

        def read_stderr() -> None:
            assert watching.stderr is not None
            for line in watching.stderr:
                said.append(line)
                if "unhealthy: brokers down" in line:
                    waiting.set()

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        # the restart only once the watch said what it waits for (a restart that wins the race to
        # its first look leaves only under-replicated partitions to report)
        assert waiting.wait(60), f"the watch never reported broker {victim} down: {said}"
        cluster.restart(victim)
        out = watching.stdout.read()
        watching.wait(timeout=120)
        reader.join(10)
    err = "".join(said)
    assert watching.returncode == 0, err
    assert json.loads(out)["healthy"] is True
    assert "unhealthy: brokers down" in err  # it said what it was waiting for

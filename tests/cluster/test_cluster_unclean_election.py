"""Unclean leader election through ElectLeaders (``kctl partition elect-leaders --election-type
unclean``, kafka-leader-election.sh's ``--election-type unclean``) on a real 3-broker cluster: a
partition whose ISR is down to a dead broker gets an out-of-sync live replica as its leader, though
the topic does not allow unclean elections on its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kctl.testing import LocalCluster
from kctl.testing.cluster_view import ClusterView
from kctl.testing.pytest_plugin import ClusterFactory

pytestmark = pytest.mark.slow

PROPERTIES = {"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "3000"}


def _kctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_unclean_election_elects_an_out_of_sync_live_replica(local_cluster_factory: ClusterFactory) -> None:
    cluster: LocalCluster = local_cluster_factory(3, PROPERTIES)
    topic = "orphaned"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    created = admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])], operation_timeout=30)
    created[topic].result(30)
    with ClusterView(cluster.zookeeper_connect) as view:
        view.wait_for_isr(topic, 0, {1, 2})
        cluster.kill(2)  # the follower dies: the ISR shrinks to the leader
        view.wait_for_isr(topic, 0, {1}, timeout=30)
        cluster.kill(1)  # then the leader: the ISR stays [1], nobody leads
        view.wait_for(lambda: view.leader_of(topic, 0) == -1, "partition offline", 30)
        cluster.restart(2)  # back, but out of sync: no clean election can pick it
        view.wait_for(lambda: 2 in view.live_brokers(), "broker 2 registered", 60)
        bootstrap = cluster.bootstrap_servers

        preferred = _kctl("partition", "elect-leaders", "--election-type", "preferred", "-t", topic,
                          "-b", bootstrap, "-f", "json")
        assert preferred.returncode == 1, preferred.stdout + preferred.stderr
        assert view.leader_of(topic, 0) == -1

        elected = _kctl("partition", "elect-leaders", "--election-type", "unclean", "-t", topic,
                        "-b", bootstrap, "-f", "json", "-X", "request.timeout.ms=20000")
        assert elected.returncode == 0, elected.stdout + elected.stderr
        rows = json.loads(elected.stdout)
        assert [(r["topic"], r["partition"], r["status"]) for r in rows] == [(topic, 0, "elected")], rows
        state = view.partition_state(topic, 0)
        assert state is not None and state.leader == 2 and set(state.isr) == {2}
        assert view.client.exists("/kctl/elect_leaders") is None, "the request must be removed once handled"

        again = _kctl("partition", "elect-leaders", "--election-type", "unclean", "-t", topic,
                      "-b", bootstrap, "-f", "json")
        assert again.returncode == 0, again.stdout + again.stderr
        assert json.loads(again.stdout)[0]["status"] == "not needed"

"""kctl.testing, the harness users' tests and kctl's own run on: a real ZooKeeper server (start, serve,
stop, restart on the same port and data), a real broker process (start with overrides, kill, pause,
restart on the same port and data directory, a refused start), a LocalCluster of three brokers
registering in ZooKeeper, and the plugin's markers and guard."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from raw_kafka import RawConnection, api_versions, kcat, metadata

from kctl.localcluster.guard import running_test
from kctl.localcluster.zookeeper import ZooKeeperStartError, four_letter_word
from kctl.testing import (
    BrokerProcess,
    BrokerStartError,
    LocalCluster,
    UnmarkedProcessError,
    ZooKeeperServer,
    new_chroot,
    wait_for,
)

pytest_plugins = ["pytester"]


@pytest.fixture
def kazoo(zookeeper: ZooKeeperServer) -> Iterator[Callable[[str], KazooClient]]:
    """``kazoo(chroot) -> KazooClient`` started on the session's server (the chroot created first);
    all are closed at teardown."""
    clients: list[KazooClient] = []

    def open_client(chroot: str) -> KazooClient:
        root = KazooClient(hosts=zookeeper.hosts, timeout=10)
        root.start(timeout=15)
        root.ensure_path(chroot)
        root.stop()
        root.close()
        client = KazooClient(hosts=zookeeper.connect_string(chroot), timeout=10)
        client.start(timeout=15)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.stop()
        client.close()


# ------------------------------------------------------------------------------------------- ZooKeeper


def test_zookeeper_serves_stops_and_restarts_with_its_data(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk").start()
    try:
        assert server.running
        assert "Mode: standalone" in four_letter_word(server.port, "srvr")
        assert server.connect_string("/a/b") == f"127.0.0.1:{server.port}/a/b"
        assert server.connect_string().startswith(f"127.0.0.1:{server.port}/kctl-test-")
        chroots = {server.chroot() for _ in range(5)} | {new_chroot("x")}
        assert len(chroots) == 6 and all(c.startswith("/") for c in chroots), chroots

        client = KazooClient(hosts=server.hosts, timeout=10)
        client.start(timeout=15)
        client.create("/kept", b"across a restart")
        client.stop()
        client.close()

        server.stop()
        assert not server.running
        assert four_letter_word(server.port, "srvr") == "", "the server still answers after stop()"

        port = server.port
        server.restart()
        assert server.port == port and server.running
        client = KazooClient(hosts=server.hosts, timeout=10)
        client.start(timeout=15)
        assert client.get("/kept")[0] == b"across a restart"
        client.stop()
        client.close()
    finally:
        server.stop()
    assert "ZooKeeperServerMain" in server.log_tail(400) or server.log_path.stat().st_size > 0


def test_the_session_zookeeper_is_one_server_chroots_isolate(
    zookeeper: ZooKeeperServer, kazoo: Callable[[str], KazooClient]
) -> None:
    first, second = kazoo(zookeeper.chroot()), kazoo(zookeeper.chroot())
    first.ensure_path("/brokers/ids")
    assert first.exists("/brokers/ids") and not second.exists("/brokers/ids")


# ------------------------------------------------------------------------------------------- a broker


def answers(broker: BrokerProcess, timeout: float = 10.0) -> bool:
    """The broker answers ApiVersions within ``timeout`` s."""
    try:
        with RawConnection(broker.bootstrap, timeout=timeout) as conn:
            return api_versions(conn).error_code == 0
    except OSError:  # TimeoutError included
        return False


def test_broker_overrides_kill_and_restart_on_the_same_port_and_data(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"num.partitions": "3", "broker.id": "4"})
    assert broker.running and broker.broker_id == 4 and broker.bootstrap == f"127.0.0.1:{broker.port}"
    topic = f"harness-{uuid.uuid4().hex[:8]}"
    kcat(broker.bootstrap, "-P", "-t", topic, "-p", "2", input=b"kept\n")
    with RawConnection(broker.bootstrap) as conn:
        meta = metadata(conn, [topic])
        assert [b.node_id for b in meta.brokers] == [4]
        assert len(meta.topics[0].partitions) == 3, "num.partitions=3 was not applied"

    port, pid = broker.port, broker.pid
    assert broker.kill() == -9
    assert not broker.running and not answers(broker, 1.0)
    broker.restart()
    assert broker.port == port and broker.pid != pid and broker.starts == 2
    consumed = kcat(broker.bootstrap, "-C", "-t", topic, "-p", "2", "-o", "beginning", "-e", "-q")
    assert consumed.stdout == b"kept\n"
    assert broker.stop() == 0
    assert "---- start 2:" in broker.log_file.read_text()


def test_a_paused_broker_answers_nothing_until_resumed(broker: BrokerProcess) -> None:
    broker.pause()
    try:
        assert not answers(broker, 1.0), "a SIGSTOPped broker answered"
    finally:
        broker.resume()
    assert answers(broker)
    broker.pause()  # stop() must end a paused broker cleanly too
    assert broker.stop() == 0


def test_a_broker_that_cannot_start_says_why(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"listeners": "nonsense"})
    with pytest.raises(BrokerStartError, match=r"exited with status 2 .*\n(.|\n)*listeners"):
        broker.start()
    assert not broker.running


# ----------------------------------------------------------------------------------------- the cluster


@pytest.mark.slow
def test_local_cluster_of_three_registers_in_zookeeper(
    tmp_path: Path, zookeeper: ZooKeeperServer, kazoo: Callable[[str], KazooClient]
) -> None:
    with LocalCluster(
        tmp_path, 3, zookeeper=zookeeper, properties={"zookeeper.session.timeout.ms": "2000"}
    ) as cluster:
        zk = kazoo(cluster.chroot)
        ids = lambda: sorted(zk.get_children("/brokers/ids"))  # noqa: E731
        assert ids() == ["1", "2", "3"]
        assert [cluster.broker(i).broker_id for i in (1, 2, 3)] == [1, 2, 3]
        assert len({cluster.broker(i).data_dir for i in (1, 2, 3)}) == 3
        assert all(cluster.broker(i).data_dir.is_relative_to(tmp_path) for i in (1, 2, 3))
        assert cluster.bootstrap_servers == ",".join(cluster.broker(i).bootstrap for i in (1, 2, 3))
        with RawConnection(cluster.broker(3).bootstrap) as conn:
            assert sorted(b.node_id for b in metadata(conn).brokers) == [1, 2, 3]
        with pytest.raises(KeyError, match="no broker 4"):
            cluster.broker(4)

        cluster.kill(2)
        wait_for(lambda: ids() == ["1", "3"], "the killed broker's registration to expire", 20)
        assert cluster.bootstrap_servers.count(",") == 1
        cluster.restart(2)
        wait_for(lambda: ids() == ["1", "2", "3"], "the restarted broker's registration", 20)
    assert not any(cluster.broker(i).running for i in (1, 2, 3))
    assert zookeeper.running, "a cluster must not stop the server it was given"


@pytest.mark.slow
def test_local_cluster_with_its_own_zookeeper(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 1).start()
    try:
        assert cluster.zookeeper.directory == tmp_path / "zookeeper" and cluster.zookeeper.running
        assert answers(cluster.broker(1))
    finally:
        cluster.stop()
    assert not cluster.zookeeper.running and not cluster.broker(1).running


def test_a_picked_port_taken_before_the_server_binds_it_is_picked_again(tmp_path: Path) -> None:
    """Parallel workers pick ports independently: one taken between the pick and the bind must not
    fail the start, nor be mistaken for this server; an explicit port is never changed."""
    server = ZooKeeperServer(tmp_path / "zk")
    taken = server.port
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        server.start()
        try:
            assert server.port != taken
            assert "Mode: standalone" in four_letter_word(server.port, "srvr")
            assert f"clientPort={server.port}" in server.config_file.read_text()
        finally:
            server.stop()
        fixed = ZooKeeperServer(tmp_path / "zk2", port=taken)
        with pytest.raises(ZooKeeperStartError, match=f"port {taken}"):
            fixed.start(timeout=20)
        assert fixed.port == taken


# --------------------------------------------------------------------------------- markers and guard


def test_an_unmarked_test_may_not_start_processes(tmp_path: Path) -> None:
    with running_test("tests/x.py::test_unit", {"zk"}), pytest.raises(UnmarkedProcessError, match="'e2e'"):
        BrokerProcess(tmp_path / "data").start()
    with running_test("tests/x.py::test_unit", {"e2e"}), pytest.raises(UnmarkedProcessError, match="'zk'"):
        ZooKeeperServer(tmp_path / "zk").start()
    assert not (tmp_path / "data").exists(), "the guard must refuse before starting anything"


def test_markers_come_from_fixtures_and_missing_ones_fail(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["kctl.testing.pytest_plugin"]\n')
    pytester.makepyfile(
        test_sample="""
        import pytest

        def test_unit():
            pass

        def test_uses_zookeeper(zookeeper):
            pass

        @pytest.fixture
        def via_factory(broker_factory):
            return broker_factory

        def test_uses_a_broker_indirectly(via_factory):
            pass

        def test_starts_a_broker_unmarked(tmp_path):
            from kctl.localcluster import broker
            broker.BrokerProcess(tmp_path / "data").start()
        """
    )
    selected = pytester.runpytest_inprocess("-m", "not e2e and not zk", "-p", "no:cacheprovider")
    selected.assert_outcomes(passed=1, failed=1, deselected=2)
    selected.stdout.fnmatch_lines(["*test_starts_a_broker_unmarked*is not marked 'e2e'*"])
    marked = pytester.runpytest_inprocess("--collect-only", "-q", "-m", "e2e", "-p", "no:cacheprovider")
    marked.stdout.fnmatch_lines(["*test_uses_a_broker_indirectly*", "1/4 tests collected (3 deselected)*"])


def test_under_xdist_a_modules_tests_share_one_worker_and_spark_has_one(pytester: pytest.Pytester) -> None:
    """``make test`` runs with ``-n 4 --dist loadfile``: a module-scoped fixture (a broker, a
    cluster) must start once per module, and the Spark modules must share one worker's JVM."""
    pytester.makeconftest('pytest_plugins = ["kctl.testing.pytest_plugin"]\n')
    log = pytester.path / "starts.log"
    body = f"""
        import os, pytest

        @pytest.fixture(scope="module")
        def shared():
            with open({str(log)!r}, "a") as f:
                f.write(__name__ + " " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")

        def test_a(shared): pass
        def test_b(shared): pass
        def test_c(shared): pass
        def test_d(shared): pass
        """
    spark = f"""
        import os

        def test_spark():
            with open({str(log)!r}, "a") as f:
                f.write("spark " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
        """
    sparks = {f"test_spark_{c}": spark for c in "abcd"}
    pytester.makepyfile(test_one=body, test_two=body, **sparks)
    result = pytester.runpytest_subprocess("-n", "4", "--dist", "loadfile", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=12)
    lines = log.read_text().splitlines()
    modules = sorted(line.split()[0] for line in lines if not line.startswith("spark"))
    assert modules == ["test_one", "test_two"], lines
    spark_workers = {line.split()[1] for line in lines if line.startswith("spark")}
    assert len(spark_workers) == 1, lines

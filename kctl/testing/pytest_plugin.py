"""pytest fixtures and markers for tests that run real ZooKeeper servers and kctl brokers.

Register the plugin once, in the top-level conftest.py::

    pytest_plugins = ["kctl.testing.pytest_plugin"]

Fixtures:

- ``zookeeper`` (session): one real ZooKeeper server for the whole session; tests isolate
  themselves with a chroot each (``zookeeper.connect_string()``).
- ``broker_factory`` (function) / ``module_broker_factory`` (module):
  ``factory(properties=None, **kwargs) -> BrokerProcess`` starts a broker with extra ``-X``
  properties in a data directory of its own; all are stopped at the end of the test / module.
- ``broker`` (function): one started broker with default properties.
- ``inprocess_broker`` (function): a real broker built in the test's process, without listeners
  (embedded metadata, no ZooKeeper), whose ``call(request, version=, principal=)`` runs an API's
  handler as a connection would (`kctl.testing.inprocess`): handler tests with no process to start;
  ``inprocess_broker_factory(properties=None)`` for brokers with other properties. Unmarked: these
  are unit tests.
- ``kafka_tool`` (session): runs Apache Kafka 3.9's own command-line tools from its jars
  (``kafka_tool("kafka-topics", "--bootstrap-server", b, "--list") -> ToolResult``,
  `kctl.testing.kafka_tools`); skips the test with the reason when the jars cannot be resolved.
- ``local_cluster_factory`` (function): ``factory(size=3, properties=None) -> LocalCluster`` on the
  session's ZooKeeper server, each cluster in a chroot of its own.

Parallel runs (pytest-xdist, ``pytest -n 4 --dist loadfile`` as ``make test`` runs): each worker
has its own session fixtures (a ZooKeeper server of its own, brokers on kernel-chosen ports, data
under its own temporary directory). With ``--dist loadfile`` the plugin's scheduler sends a module's
tests to one worker, so a module-scoped broker or cluster starts once, as in a serial run, and sends
every module named ``test_spark_*`` to one worker, so only one Spark JVM starts (`ModuleScheduling`).

Markers: ``zk`` (needs ZooKeeper), ``e2e`` (starts broker processes or external clients), ``spark``,
``slow``. Tests get ``zk`` and ``e2e`` automatically from the fixtures they use (directly or through
other fixtures), from a module holding `BrokerProcess`, `LocalCluster` or `start_zookeeper`, and
(``e2e``) from a module named ``test_e2e_*``; so ``pytest -m "not e2e and not zk"`` runs the unit
tests alone. A test that starts a broker or ZooKeeper without its marker fails
(`kctl.localcluster.guard`), so a missing marker cannot go unnoticed.

kctl's user state (the current local cluster `kctl cluster up` remembers,
`kctl.client.current_cluster`) never touches the user's home: the session points ``KCTL_STATE_DIR``
at a temporary directory, and every test gets an empty one of its own (the autouse fixture
``kctl_state_dir``), so that a cluster one test brings up is never another test's default.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kctl.client.current_cluster import STATE_DIR_ENV
from kctl.localcluster import guard
from kctl.localcluster.broker import BrokerProcess
from kctl.localcluster.cluster import LocalCluster
from kctl.localcluster.zookeeper import (
    ZooKeeperServer,
    ZooKeeperStartError,
    ZooKeeperUnavailableError,
    start_zookeeper,
)
from kctl.localcluster.zookeeper_ensemble import ZooKeeperEnsemble
from kctl.testing.kafka_dist import KafkaJarsUnavailable
from kctl.testing.kafka_tools import KafkaTools, required

if TYPE_CHECKING:
    from kctl.testing.inprocess import InProcessBroker

MARKERS = {
    "zk": "needs a real ZooKeeper server",
    "e2e": "starts broker processes or external clients (kcat, confluent-kafka, kafka-python)",
    "spark": "needs pyspark",
    "slow": "takes more than a few seconds on its own",
}
E2E_FIXTURES = frozenset(
    {
        "broker",
        "broker_factory",
        "module_broker_factory",
        "local_cluster_factory",
        "module_cluster_factory",
        "kafka_tool",
    }
)
ZK_FIXTURES = frozenset({"zookeeper", "local_cluster_factory", "module_cluster_factory"})
E2E_OBJECTS: tuple[object, ...] = (BrokerProcess, LocalCluster)
ZK_OBJECTS: tuple[object, ...] = (LocalCluster, start_zookeeper, ZooKeeperEnsemble)

BrokerFactory = Callable[..., BrokerProcess]
ClusterFactory = Callable[..., LocalCluster]


_session_state_dir: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _session_state_dir
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    # kctl's user state goes to a temporary directory, never the user's home (module docstring)
    _session_state_dir = tempfile.mkdtemp(prefix="kctl-state-")
    os.environ[STATE_DIR_ENV] = _session_state_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_state_dir is not None:
        shutil.rmtree(_session_state_dir, ignore_errors=True)


@pytest.fixture(autouse=True)
def kctl_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty kctl state directory (``KCTL_STATE_DIR``) for each test: no current local cluster
    unless the test brings one up."""
    directory = tmp_path_factory.mktemp("kctl-state")
    monkeypatch.setenv(STATE_DIR_ENV, str(directory))
    return directory


def _holds(module: object, objects: tuple[object, ...]) -> bool:
    values = vars(module).values() if module is not None else ()
    return any(value is obj for value in values for obj in objects)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``e2e``/``zk`` every test that uses a broker or ZooKeeper (see the module docstring)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        module = getattr(item, "module", None)
        module_name = getattr(module, "__name__", "").rpartition(".")[2]
        if fixtures & E2E_FIXTURES or _holds(module, E2E_OBJECTS) or module_name.startswith("test_e2e_"):
            item.add_marker(pytest.mark.e2e)
        if fixtures & ZK_FIXTURES or _holds(module, ZK_OBJECTS):
            item.add_marker(pytest.mark.zk)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """While a test runs, it may start only the processes its markers declare (`kctl.localcluster.guard`)."""
    with guard.running_test(item.nodeid, {mark.name for mark in item.iter_markers()}):
        yield


SHARED_WORKER_PREFIXES = ("test_spark_",)  # modules with these names share one worker (one JVM)


def _module_scheduling() -> type:
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        """``--dist loadfile`` with the modules of one ``SHARED_WORKER_PREFIXES`` prefix as one unit."""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.partition("::")[0]
            name = module.rpartition("/")[2]
            for prefix in SHARED_WORKER_PREFIXES:
                if name.startswith(prefix):
                    return prefix
            return module

    return ModuleScheduling


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scheduler for ``--dist loadfile`` (see the module docstring)."""
    if config.getvalue("dist") != "loadfile":
        return None
    return _module_scheduling()(config, log)


def _started_zookeeper(directory: Path) -> ZooKeeperServer:
    try:
        return start_zookeeper(directory)
    except (ZooKeeperUnavailableError, ZooKeeperStartError) as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper server for the whole test session (stopped at its end)."""
    server = _started_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield server
    finally:
        server.stop()


def _broker_factory(directory: Callable[[int], Path], started: list[BrokerProcess]) -> BrokerFactory:
    def factory(properties: Mapping[str, str] | None = None, **kwargs: Any) -> BrokerProcess:
        process = BrokerProcess(directory(len(started)), properties, **kwargs)
        started.append(process)
        return process.start()

    return factory


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """``broker_factory(properties=None, **kw) -> BrokerProcess``: a started broker with extra -X
    properties, each in its own data directory under tmp_path; all are stopped at teardown."""
    started: list[BrokerProcess] = []
    yield _broker_factory(lambda n: tmp_path / f"broker-{n}", started)
    for process in started:
        process.stop()


@pytest.fixture(scope="module")
def module_broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    """Like `broker_factory`, for brokers a whole test module shares (stopped after its last test)."""
    started: list[BrokerProcess] = []
    yield _broker_factory(lambda n: tmp_path_factory.mktemp(f"broker-{n}") / "data", started)
    for process in started:
        process.stop()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A started broker with default properties (stopped at teardown)."""
    return broker_factory()


@pytest.fixture
def inprocess_broker_factory(tmp_path: Path) -> Iterator[Callable[..., InProcessBroker]]:
    """``inprocess_broker_factory(properties=None) -> InProcessBroker``: brokers in this process, each
    in its own directory under tmp_path; all are closed at teardown (kctl.testing.inprocess)."""
    from kctl.testing.inprocess import InProcessBroker  # the broker package: only for tests using it

    made: list[InProcessBroker] = []

    def factory(properties: Mapping[str, str] | None = None) -> InProcessBroker:
        made.append(InProcessBroker(tmp_path / f"inprocess-{len(made)}", properties))
        return made[-1]

    yield factory
    for broker in made:
        broker.close()


@pytest.fixture
def inprocess_broker(inprocess_broker_factory: Callable[..., InProcessBroker]) -> InProcessBroker:
    """A broker in this process with default properties (kctl.testing.inprocess)."""
    return inprocess_broker_factory()


def _cluster_factory(
    directory: Callable[[int], Path], zookeeper: ZooKeeperServer, started: list[LocalCluster]
) -> ClusterFactory:
    def factory(
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        racks: Mapping[int, str] | None = None,
        broker_properties: Mapping[int, Mapping[str, str]] | None = None,
    ) -> LocalCluster:
        cluster = LocalCluster(
            directory(len(started)), size, properties=properties, zookeeper=zookeeper, racks=racks
        )
        for broker_id, overrides in (broker_properties or {}).items():
            cluster.broker(broker_id).properties.update(overrides)
        started.append(cluster)
        return cluster.start()

    return factory


@pytest.fixture
def local_cluster_factory(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[ClusterFactory]:
    """``local_cluster_factory(size=3, properties=None, racks=None, broker_properties=None) ->
    LocalCluster``, started, on the session's ZooKeeper server in a chroot of its own (``racks``:
    broker id -> its broker.rack; ``broker_properties``: broker id -> properties of that broker
    alone); all are stopped at teardown."""
    started: list[LocalCluster] = []
    yield _cluster_factory(lambda n: tmp_path / f"cluster-{n}", zookeeper, started)
    for cluster in started:
        cluster.stop()


@pytest.fixture(scope="module")
def module_cluster_factory(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[ClusterFactory]:
    """Like `local_cluster_factory`, for clusters a whole test module shares (stopped after its last
    test)."""
    started: list[LocalCluster] = []
    yield _cluster_factory(lambda n: tmp_path_factory.mktemp(f"cluster-{n}"), zookeeper, started)
    for cluster in started:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_tool() -> KafkaTools:
    """``kafka_tool(script, *args, input=None) -> ToolResult``: Apache Kafka's own tools (kafka-topics,
    kafka-configs, ...) from its jars (`kctl.testing.kafka_tools`). Skips, with the reason in the
    summary, when the jars cannot be resolved (no Java, no Maven, Maven Central unreachable); fails
    instead with ``KCTL_REQUIRE_KAFKA_TOOLS=1``."""
    try:
        return KafkaTools()
    except KafkaJarsUnavailable as error:
        reason = f"Apache Kafka's tools unavailable: {error}"
        if required():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)

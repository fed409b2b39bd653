"""Client quotas (issue 16 §2): AlterClientQuotas / DescribeClientQuotas through kctl's admin client and
`kctl quota`, stored in the embedded store and in ZooKeeper (Kafka's znodes), and byte-rate quotas
enforced as Kafka does: librdkafka producers and consumers over their quota are told throttle_time_ms
(its throttle_cb fires), and the bytes the broker appended stay near the quota — measured on the
broker's own clock, from the LogAppendTime timestamps of the batches in the log."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import kctl

from kctl.broker.quotas import FETCH, PRODUCE, QuotaManager
from kctl.client import AdminClient
from kctl.client.admin.quotas import ANY, DEFAULT, QuotaAlteration
from kctl.records.header import iter_headers
from kctl.testing import wait_for
from kctl.zk.quota_store import FileQuotaStore, entity_path, parse_entity_path, sanitize

if TYPE_CHECKING:
    from kctl.testing import BrokerProcess, LocalCluster

QUOTA = 100_000  # bytes per second
WINDOW = {"quota.window.size.seconds": "1", "quota.window.num": "2"}


# -- the quota manager, in process -------------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _manager(tmp_path: Path, clock: FakeClock, **kw: Any) -> QuotaManager:
    manager = QuotaManager(FileQuotaStore(tmp_path), clock=clock, **kw)
    manager.start()
    return manager


def test_the_most_specific_entity_gives_the_quota_and_the_measured_group(tmp_path: Path) -> None:
    manager = _manager(tmp_path, FakeClock())
    store = manager.store
    store.alter(("<default>", None), {PRODUCE: 10})
    store.alter((None, "<default>"), {PRODUCE: 20})
    store.alter((None, "app"), {PRODUCE: 30, FETCH: 31})
    store.alter(("alice", None), {PRODUCE: 40})
    store.alter(("alice", "app"), {PRODUCE: 50})
    assert manager.resolve(PRODUCE, "alice", "app") == (50, (PRODUCE, "alice", "app"))
    assert manager.resolve(PRODUCE, "alice", "other") == (40, (PRODUCE, "alice", ""))
    assert manager.resolve(PRODUCE, "bob", "app") == (10, (PRODUCE, "bob", ""))  # <default> user first
    assert manager.resolve(FETCH, "bob", "app") == (31, (FETCH, "", "app"))  # each key on its own
    store.alter(("<default>", None), {PRODUCE: None})
    assert manager.resolve(PRODUCE, "bob", "app") == (30, (PRODUCE, "", "app"))
    assert manager.resolve(PRODUCE, "bob", "x") == (20, (PRODUCE, "", "x"))
    assert manager.resolve(FETCH, "bob", "x") is None


def test_throttle_time_follows_kafkas_rate_over_the_window(tmp_path: Path) -> None:
    clock = FakeClock()
    manager = _manager(tmp_path, clock, window_size_ms=1000, window_count=11)
    manager.store.alter((None, "c"), {PRODUCE: 1000})
    # a new client's bytes are measured over at least 10 whole windows: 10 kB at once is within 1 kB/s
    assert manager.record(PRODUCE, None, "c", 10_000) == 0
    # 1 kB more: 11 kB over 10 s = 1.1 kB/s; throttle (1100 - 1000) / 1000 * 10 s = 1 s
    assert manager.record(PRODUCE, None, "c", 1_000) == 1000
    assert manager.record(PRODUCE, "User:x", "d", 10**9) == 0  # no quota for client d
    clock.now += 5  # 5 s later, within the same 11 samples: 11 kB + 1 kB over 10 s
    assert manager.record(PRODUCE, None, "c", 1_000) == 2000
    manager.unrecord(PRODUCE, None, "c", 1_000)
    assert manager.measured_rate(PRODUCE, None, "c") == pytest.approx(1100)
    clock.now += 20  # every sample expired
    assert manager.record(PRODUCE, None, "c", 9_000) == 0
    assert manager.record(PRODUCE, None, "c", 10**9) == 11_000  # capped at the whole window


def test_client_metrics_give_each_clients_byte_rate_and_average_throttle(tmp_path: Path) -> None:
    """What the broker's /metrics serves as kafka_server_produce_byte_rate / _throttle_time: per
    measured client, the rate and the mean throttle over its requests (throttled or not)."""
    clock = FakeClock()
    manager = _manager(tmp_path, clock, window_size_ms=1000, window_count=11)
    manager.store.alter((None, "c"), {PRODUCE: 1000})
    assert manager.client_metrics() == []
    assert manager.record(PRODUCE, None, "c", 10_000) == 0
    assert manager.record(PRODUCE, None, "c", 1_000) == 1000
    [(key, user, client, byte_rate, throttle)] = manager.client_metrics()
    assert (key, user, client) == (PRODUCE, "", "c")
    assert byte_rate == pytest.approx(1100)
    assert throttle == pytest.approx(500)  # (0 + 1000) / 2 requests
    clock.now += 20  # every sample expired: nothing measured, nothing throttled
    [(_, _, _, byte_rate, throttle)] = manager.client_metrics()
    assert byte_rate == 0 and throttle == 0


def test_entity_paths_are_kafkas(tmp_path: Path) -> None:
    assert entity_path(("User:CN=a,O=b", "<default>")) == "users/User%3ACN%3Da%2CO%3Db/clients/<default>"
    assert entity_path((None, "my client*")) == "clients/my%20client%2A"
    assert sanitize("a+b") == "a%2Bb"
    for entity in [("alice", None), (None, "x/y"), ("<default>", "<default>"), ("u v", "c")]:
        assert parse_entity_path(entity_path(entity)) == entity


# -- a broker ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def quota_broker(module_broker_factory: Any) -> BrokerProcess:
    return module_broker_factory({**WINDOW, "metrics.listener": "http://127.0.0.1:0"})


def test_describe_lists_what_alter_set(quota_broker: BrokerProcess) -> None:
    with AdminClient(quota_broker.bootstrap) as admin:
        results = admin.alter_client_quotas(
            [
                QuotaAlteration({"user": "alice"}, {"producer_byte_rate": 1024, "request_percentage": 12.5}),
                QuotaAlteration({"client-id": None}, {"consumer_byte_rate": 4096}),
                QuotaAlteration({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 2048}),
                QuotaAlteration({"user": "bob"}, {"no_such_quota": 1}),
                QuotaAlteration({"user": "bob"}, {"producer_byte_rate": 1.5}),
                QuotaAlteration({"ip": "1.2.3.4"}, {"connection_creation_rate": 1}),
            ]
        )
        assert [r.error_code for r in results[:3]] == [0, 0, 0]
        assert [r.error_code for r in results[3:]] == [42, 42, 42]  # INVALID_REQUEST
        assert "no_such_quota" in (results[3].error_message or "")
        everything = {
            tuple(sorted(q.entity.items(), key=str)): q.values for q in admin.describe_client_quotas()
        }
        assert everything == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
            (("client-id", None),): {"consumer_byte_rate": 4096.0},
            (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 2048.0},
        }
        only_alice = admin.describe_client_quotas({"user": "alice"}, strict=True)
        assert [q.entity for q in only_alice] == [{"user": "alice"}]
        any_user = admin.describe_client_quotas({"user": ANY})
        assert sorted(len(q.entity) for q in any_user) == [1, 2]
        default_client = admin.describe_client_quotas({"client-id": DEFAULT})
        assert [q.entity for q in default_client] == [{"client-id": None}]
        # validate_only changes nothing; removing keys empties the entity
        [checked] = admin.alter_client_quotas(
            [QuotaAlteration({"user": "alice"}, {"producer_byte_rate": 1})], validate_only=True
        )
        assert checked.error_code == 0
        assert (
            admin.describe_client_quotas({"user": "alice"}, strict=True)[0].values["producer_byte_rate"]
            == 1024
        )
        admin.alter_client_quotas(
            [
                QuotaAlteration({"user": "alice"}, {"producer_byte_rate": None, "request_percentage": None}),
                QuotaAlteration({"client-id": None}, {"consumer_byte_rate": None}),
                QuotaAlteration({"user": "alice", "client-id": "app"}, {"producer_byte_rate": None}),
            ]
        )
        assert admin.describe_client_quotas() == []
    stored = json.loads((quota_broker.data_dir / "client-quotas.json").read_text())
    assert stored["quotas"] == {}


def test_kctl_quota_plans_then_executes(quota_broker: BrokerProcess) -> None:
    b = quota_broker.bootstrap
    plan = kctl(
        "quota", "alter", "--client-id", "cli", "--set", "producer_byte_rate=2048", "-b", b, "-f", "json"
    )
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout) == [
        {
            "user": None,
            "client_id": "cli",
            "key": "producer_byte_rate",
            "current": None,
            "new": 2048,
            "status": "planned",
            "message": None,
        }
    ]
    assert "--execute" in plan.stderr
    with AdminClient(b) as admin:
        assert admin.describe_client_quotas() == []  # a plan changes nothing
    done = kctl(
        "quota", "alter", "--client-id", "cli", "--set", "producer_byte_rate=2048", "--execute", "-b", b
    )
    assert done.returncode == 0, done.stderr
    dflt = kctl(
        "quota", "alter", "--default", "user", "--set", "consumer_byte_rate=1e6", "--execute", "-b", b
    )
    assert dflt.returncode == 0, dflt.stderr
    rows = kctl("quota", "describe", "-b", b, "-f", "jsonl")
    assert rows.returncode == 0, rows.stderr
    described = [json.loads(line) for line in rows.stdout.splitlines()]
    assert sorted(described, key=str) == sorted(
        [
            {
                "user": None,
                "client_id": "cli",
                "producer_byte_rate": 2048,
                "consumer_byte_rate": None,
                "request_percentage": None,
                "controller_mutation_rate": None,
            },
            {
                "user": "<default>",
                "client_id": None,
                "producer_byte_rate": None,
                "consumer_byte_rate": 1000000,
                "request_percentage": None,
                "controller_mutation_rate": None,
            },
        ],
        key=str,
    )
    table = kctl("quota", "describe", "--client-id", "cli", "-b", b)
    assert table.returncode == 0 and table.stdout.split()[:2] == ["USER", "CLIENT-ID"]
    assert "2048" in table.stdout and "1000000" not in table.stdout
    bad = kctl("quota", "alter", "--client-id", "cli", "--set", "producer_byte_rate=-1", "--execute", "-b", b)
    assert bad.returncode == 1 and "INVALID_REQUEST" in bad.stdout
    assert kctl("quota", "alter", "--client-id", "cli", "--set", "oops", "-b", b).returncode == 2
    delete = kctl(
        "quota", "alter", "--client-id", "cli", "--delete", "producer_byte_rate", "--execute", "-b", b
    )
    assert delete.returncode == 0, delete.stderr
    with AdminClient(b) as admin:
        assert [q.entity for q in admin.describe_client_quotas()] == [{"user": None}]
        admin.alter_client_quotas([QuotaAlteration({"user": None}, {"consumer_byte_rate": None})])


def _appended(broker: BrokerProcess, topic: str) -> list[tuple[int, int]]:
    """(broker append time ms, bytes) of each batch in the log of ``topic``-0."""
    out = []
    for segment in sorted((broker.data_dir / f"{topic}_0").glob("*.log")):
        data = segment.read_bytes()
        out += [(header.max_timestamp, header.size) for _, header in iter_headers(data)]
    return out


def test_a_producer_over_its_quota_is_throttled_and_held_near_it(quota_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaPartition
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import NewTopic

    b = quota_broker.bootstrap
    kafka_admin = KafkaAdmin({"bootstrap.servers": b})
    created = kafka_admin.create_topics(
        [NewTopic("throttled", 1, 1, config={"message.timestamp.type": "LogAppendTime"})]
    )
    created["throttled"].result(timeout=30)
    with AdminClient(b) as admin:
        admin.alter_client_quotas(
            [
                QuotaAlteration({"client-id": "slow-producer"}, {"producer_byte_rate": QUOTA}),
                QuotaAlteration({"client-id": "slow-consumer"}, {"consumer_byte_rate": QUOTA}),
            ]
        )
    throttles: list[float] = []
    producer = Producer(
        {
            "bootstrap.servers": b,
            "client.id": "slow-producer",
            "linger.ms": 5,
            "batch.size": 20_000,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    value = b"x" * 10_000
    for i in range(40):
        producer.produce("throttled", value, key=str(i).encode(), partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0.5)  # throttle events are delivered by poll
    assert throttles and max(throttles) > 0
    from kctl.testing.metrics import scrape

    assert quota_broker.metrics_url is not None
    samples = scrape(quota_broker.metrics_url)  # what an operator's dashboard sees of it
    throttle = samples.value("kafka_server_produce_throttle_time", user="", client_id="slow-producer")
    byte_rate = samples.value("kafka_server_produce_byte_rate", user="", client_id="slow-producer")
    assert throttle is not None and throttle > 0, samples.matching("kafka_server_produce_throttle_time")
    assert byte_rate is not None and byte_rate > 0

    batches = _appended(quota_broker, "throttled")
    total = sum(size for _, size in batches)
    assert total >= 400_000
    span_s = (batches[-1][0] - batches[0][0]) / 1000
    print(f"appended {total} bytes in {span_s:.2f} s under a quota of {QUOTA} B/s; throttles {throttles}")
    # Within the quota after the first (measurement) window: at most the quota over the span plus
    # that window's burst. Without throttling the whole topic lands within a few milliseconds.
    assert total <= 1.25 * QUOTA * (span_s + 2), (total, span_s)
    assert total / (span_s + 2) >= 0.2 * QUOTA  # throttled, not stalled

    consumer_throttles: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": b,
            "client.id": "slow-consumer",
            "group.id": "slow",
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 50_000,
            "message.max.bytes": 50_000,
            "max.partition.fetch.bytes": 50_000,
            "throttle_cb": lambda event: consumer_throttles.append(event.throttle_time),
        }
    )
    consumer.assign([KafkaPartition("throttled", 0, 0)])
    received = 0
    deadline = time.monotonic() + 60
    try:
        while received < 40 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received += 1
    finally:
        consumer.close()
    assert received == 40  # a throttled fetch loses nothing
    assert consumer_throttles and max(consumer_throttles) > 0


# -- ZooKeeper ---------------------------------------------------------------------------------------
def test_quotas_live_in_kafkas_znodes(local_cluster_factory: Any) -> None:
    from kazoo.client import KazooClient

    cluster: LocalCluster = local_cluster_factory(1, WINDOW)
    with AdminClient(cluster.bootstrap_servers) as admin:
        [result] = admin.alter_client_quotas(
            [QuotaAlteration({"user": "User:CN=x", "client-id": None}, {"producer_byte_rate": 5000})]
        )
        assert result.error_code == 0
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=15)
    try:
        data, _ = zk.get("/config/users/User%3ACN%3Dx/clients/<default>")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "5000"}}
        notes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/User%3ACN%3Dx/clients/<default>"} in notes
        # as kafka-configs.sh writes it: the znode, then the notification; the broker follows
        zk.create(
            "/config/clients/other", b'{"version":1,"config":{"consumer_byte_rate":"777"}}', makepath=True
        )
        zk.create(
            "/config/changes/config_change_", b'{"version":2,"entity_path":"clients/other"}', sequence=True
        )
    finally:
        zk.stop()
        zk.close()
    with AdminClient(cluster.bootstrap_servers) as admin:

        def described() -> dict[Any, dict[str, float]] | None:
            found = {
                tuple(sorted(q.entity.items(), key=str)): q.values for q in admin.describe_client_quotas()
            }
            return found if len(found) == 2 else None

        found = wait_for(described, "the broker to follow the change notification", 30)
    assert found == {
        (("client-id", None), ("user", "User:CN=x")): {"producer_byte_rate": 5000.0},
        (("client-id", "other"),): {"consumer_byte_rate": 777.0},
    }
    # and enforced there as in embedded mode
    from confluent_kafka import Producer

    with AdminClient(cluster.bootstrap_servers) as admin:
        admin.alter_client_quotas(
            [QuotaAlteration({"client-id": "zk-producer"}, {"producer_byte_rate": 20_000})]
        )
    throttles: list[float] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "client.id": "zk-producer",
            "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    for _ in range(8):
        producer.produce("zk-quota", b"z" * 10_000)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0.5)
    assert throttles and max(throttles) > 0

"""kctl's own records-out counter (``kctl_server_brokertopicmetrics_messagesout_total``; Kafka has no
such metric) on a real `kctl broker start` with ``metrics.listener``, read by confluent-kafka
consumers: each record a consumer is sent counts exactly once — whole reads, reads cut by
``max.partition.fetch.bytes`` inside a batch (the partial batch counts at the next fetch), reads from
the middle of a batch, batches long past the ones the log keeps positions of — and a follower-less
broker's other topics and the all-topics series add up."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from kctl.log.segment import RECENT_BATCHES
from kctl.testing import BrokerProcess, create_topic, wait_for
from kctl.testing.metrics import scrape
from kctl.testing.pytest_plugin import BrokerFactory

TOPIC = "counted"
BATCHES = 3 * RECENT_BATCHES  # the first ones found through the index, not remembered positions
PER_BATCH = 5
RECORDS = BATCHES * PER_BATCH
NAME = "kctl_server_brokertopicmetrics_messagesout_total"


@pytest.fixture(scope="module")
def broker(module_broker_factory: BrokerFactory) -> BrokerProcess:
    broker = module_broker_factory({"metrics.listener": "http://127.0.0.1:0"})
    create_topic(broker.bootstrap, TOPIC, 1)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for batch in range(BATCHES):  # one batch of PER_BATCH records per flush
        for n in range(PER_BATCH):
            producer.produce(TOPIC, b"%d-%d" % (batch, n) * 10, partition=0)
        assert producer.flush(30) == 0
    return broker


def _out(broker: BrokerProcess, **labels: str) -> float:
    assert broker.metrics_url is not None
    return scrape(broker.metrics_url).value(NAME, **labels) or 0.0


def _consume(broker: BrokerProcess, start: int, expected: int, **config: object) -> None:
    settings = {"bootstrap.servers": broker.bootstrap, "group.id": "records-out", "enable.auto.commit": False}
    consumer = ck.Consumer({**settings, **config})
    try:
        consumer.assign([ck.TopicPartition(TOPIC, 0, start)])
        seen: list[int] = []

        def done() -> bool:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    seen.append(message.offset())
            return len(seen) >= expected

        wait_for(done, f"{expected} records from offset {start}")
        assert seen == list(range(start, start + expected))
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("start", "config"),
    [
        (0, {}),  # whole reads
        (0, {"max.partition.fetch.bytes": 700}),  # cut inside batches (about 300 bytes each)
        (PER_BATCH * 10 + 2, {"max.partition.fetch.bytes": 1500}),  # from the middle of a batch
    ],
    ids=["whole", "cut", "mid-batch"],
)
def test_every_record_sent_to_a_consumer_counts_once(
    broker: BrokerProcess, start: int, config: dict[str, object]
) -> None:
    before, every_before = _out(broker, topic=TOPIC), _out(broker)
    _consume(broker, start, RECORDS - start, **config)
    # the consumer may still be fetching (long polls at the end of the log, which send nothing)
    assert _out(broker, topic=TOPIC) - before == RECORDS - start
    assert _out(broker) - every_before == RECORDS - start

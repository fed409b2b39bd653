"""The protocol fuzzer (kctl.testing.fuzz) against a real `kctl broker start` (issue 17): a seeded run
of tens of thousands of mutated request frames — every API and version, client-like frames with real
record batches in every codec, structure-aware mutations of lengths, counts, varints and nested
compressed batches. The broker must not crash, hang a connection, log an unhandled exception, or let
its RSS or open descriptors grow without bound, and a health probe must be answered throughout. The
run prints its figures (frames fuzzed, crashes, probe latency, RSS, fds); bench/bench_fuzz.py is the
longer run. ``KCTL_FUZZ_FRAMES`` and ``KCTL_FUZZ_SEED`` change the run's size and seed."""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Iterator

import pytest
from raw_kafka import assert_broker_healthy, create_topic

from kctl.testing import BrokerProcess, wait_for
from kctl.testing.fuzz import (
    Fuzzer,
    corpus,
    find_batch,
    mutate,
    mutate_batch,
    process_figures,
    process_sockets,
)

FRAMES = int(os.environ.get("KCTL_FUZZ_FRAMES", "20000"))
SEED = int(os.environ.get("KCTL_FUZZ_SEED", "17"))
TOPIC = "fuzzed"


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("fuzz")
    # long polls end quickly: a fuzzed Fetch may ask to wait for days
    broker = BrokerProcess(directory / "data", {"fetch.wait.max.ms": "100"}).start()
    try:
        assert create_topic(broker.bootstrap, TOPIC) == 0
        yield broker
    finally:
        broker.stop()


def test_the_corpus_covers_every_api_and_version() -> None:
    from kctl.protocol.registry import SCHEMAS

    frames = corpus(TOPIC)
    keys = {struct.unpack_from(">hh", frame, 4) for frame in frames}
    for api_key, schema in SCHEMAS.items():
        for version in range(schema.min_version, schema.max_version + 1):
            assert (api_key, version) in keys


def test_mutants_are_framed_and_seeded() -> None:
    frames = corpus(TOPIC)
    first = [mutate(random.Random(5).choice(frames), random.Random(n)) for n in range(300)]
    again = [mutate(random.Random(5).choice(frames), random.Random(n)) for n in range(300)]
    assert first == again
    for mutant in first:
        assert struct.unpack_from(">i", mutant)[0] == len(mutant) - 4


def test_damaged_batches_keep_a_valid_crc() -> None:
    """The nested-batch mutator gets its damage past the CRC check, so the broker's handling of the
    records behind it (not only its CRC check) is what is fuzzed."""
    rng = random.Random(3)
    produce = [f for f in corpus(TOPIC) if struct.unpack_from(">h", f, 4)[0] == 0 and b"rdkafka" in f]
    assert len(produce) == 5  # one per codec
    for _ in range(100):
        frame = rng.choice(produce)
        body = bytearray(frame[4:])
        assert mutate_batch(body, rng)
        assert body != frame[4:]
        assert find_batch(body) >= 0  # a batch whose CRC-32C matches its (damaged) contents


def test_a_seeded_fuzz_run_leaves_the_broker_healthy(target: BrokerProcess) -> None:
    assert target.pid is not None
    start_rss, _ = process_figures(target.pid)
    start_sockets = process_sockets(target.pid)
    fuzzer = Fuzzer(
        target.bootstrap,
        target.pid,
        corpus(TOPIC, SEED),
        seed=SEED,
        connections=8,
        alive=lambda: target.running,
    )
    report = fuzzer.run(FRAMES)
    print(f"\nfuzz (seed {SEED}): {report.summary()}")
    assert report.frames == FRAMES
    assert not report.crashed and target.running, target.log_tail()
    assert report.hangs == 0, report.summary()
    assert report.probes >= FRAMES // fuzzer.probe_every
    assert max(report.rss) < start_rss + 256 * 1024 * 1024, report.summary()
    # the fuzzer's connections are closed: so are the broker's sockets (log files of topics the
    # fuzzed requests created may stay open)
    pid = target.pid
    wait_for(lambda: process_sockets(pid) <= start_sockets, "the broker's sockets closed", 10)
    log = target.log_file.read_text(errors="replace")
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 : log.index("Traceback") + 3000]
    assert_broker_healthy(target)

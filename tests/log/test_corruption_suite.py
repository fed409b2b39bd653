"""The corruption suite (issue #17 §2): seeded partition damage — bit flips, truncations, garbage,
zeroed regions, damaged or missing indexes, orphan swap/cleaned/deleted files — checked against the
exact-valid-prefix rule (kctl.testing.corruption) for the offline tool (``recover``), for broker
start-up after an unclean and after a clean stop (in-process LogManager loads), and a handful through
a real broker process. Prints the case counts and the records lost (0)."""

from __future__ import annotations

import logging
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_batch
from raw_kafka import create_topic, produce, running_broker, unique

import kctl.protocol as kp
from kctl.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kctl.records.header import MAGIC_OFFSET, parse_header
from kctl.testing.corruption import Summary, Template, build_template, run_cases

CASES = {"offline": 1200, "startup-unclean": 600, "startup-clean": 600}


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A tmpfs directory where there is one (the cases fsync a lot), else a temporary one."""
    shm = Path("/dev/shm")
    directory = Path(tempfile.mkdtemp(prefix="kctl-corruption-", dir=shm if shm.is_dir() else None))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def template(workdir: Path) -> Template:
    return build_template(workdir)


@pytest.fixture(autouse=True)
def quiet_recovery_logs() -> Iterator[None]:
    """Every case logs what recovery cut: thousands of warnings the test does not need to show."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def _report(mode: str, summary: Summary) -> None:
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(summary.by_kind.items()))
    print(
        f"\ncorruption suite [{mode}]: {summary.cases} cases, {summary.crashed} crashed, "
        f"{summary.lost_records} records lost ({kinds})"
    )
    assert not summary.failures, "\n".join(summary.failures[:20])
    assert summary.crashed == 0 and summary.lost_records == 0


@pytest.mark.parametrize("mode", list(CASES))
def test_seeded_damage_keeps_the_exact_valid_prefix(template: Template, workdir: Path, mode: str) -> None:
    summary = run_cases(template, workdir, seed=17, count=CASES[mode], mode=mode)
    _report(mode, summary)
    assert summary.cases == CASES[mode]


def _fetch_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every batch of partition 0 (one segment per fetch), each from its magic byte on."""
    from raw_kafka import RawConnection

    batches: list[bytes] = []
    offset = 0
    with RawConnection(bootstrap) as conn:
        while True:
            partition = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 24)
            body = FetchRequest(
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 24,
                topics=[FetchTopic(topic=topic, partitions=[partition])],
                forgotten_topics_data=[],
            )
            [part] = conn.request(kp.ApiKey.FETCH, 12, body).responses[0].partitions
            data, position = bytes(part.records or b""), 0
            while position + 61 <= len(data):
                header = parse_header(data, position)
                batches.append(data[position + 16 : position + header.size])
                offset = header.next_offset
                position += header.size
            if not data or offset >= part.high_watermark:
                return batches


@pytest.mark.e2e
def test_a_real_broker_restarts_over_tail_damage(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Three seeded tail damages (garbage, a cut, a flipped magic) to a cleanly stopped broker's active
    segment: each restart serves exactly the undamaged batches and appends after them."""
    rng = random.Random(17)
    with running_broker(tmp_path_factory, {"auto.create.topics.enable": "false"}, "corruption") as broker:
        name = unique("corruption")
        assert create_topic(broker.bootstrap, name) == 0
        for _ in range(6):
            assert produce(broker.bootstrap, name, 0, make_batch(4)).error_code == 0
        cases = 0
        for kind in ("garbage", "cut", "magic"):
            expected = _fetch_all(broker.bootstrap, name)
            broker.stop()
            segment = max(
                (p for p in Path(broker.data_dir).rglob(f"{name}_0/*.log") if p.stat().st_size), key=str
            )
            data = bytearray(segment.read_bytes())
            start = 0
            while start + parse_header(data, start).size < len(data):
                start += parse_header(data, start).size
            if kind == "garbage":
                data += rng.randbytes(rng.randint(1, 500))
            elif kind == "cut":
                del data[rng.randrange(start + 1, len(data)) :]
                expected = expected[:-1]
            else:
                data[start + MAGIC_OFFSET] = rng.choice([0, 1, 3, 88])
                expected = expected[:-1]
            segment.write_bytes(data)
            broker.start()
            assert _fetch_all(broker.bootstrap, name) == expected, kind
            assert produce(broker.bootstrap, name, 0, make_batch(2)).error_code == 0
            cases += 1
        print(f"\ncorruption suite [real broker]: {cases} restarts over tail damage, 0 lost")

"""Producer id allocation (`kctl.broker.producer_ids`): ids never handed out twice, across restarts
and against a damaged ``producer-id-block`` file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kctl.broker.producer_ids import BLOCK_SIZE, BROKER_SHIFT, CorruptProducerIdBlockError, ProducerIdManager
from kctl.log.naming import PRODUCER_ID_BLOCK


def test_ids_continue_after_a_restart_past_every_id_handed_out(tmp_path: Path) -> None:
    first = ProducerIdManager(3, tmp_path)
    handed = [first.next_id() for _ in range(BLOCK_SIZE + 5)]
    assert handed == list(range(3 << BROKER_SHIFT, (3 << BROKER_SHIFT) + BLOCK_SIZE + 5))
    assert (tmp_path / PRODUCER_ID_BLOCK).read_text().split() == ["1", "3", str(2 * BLOCK_SIZE)]
    again = ProducerIdManager(3, tmp_path)
    assert again.next_id() > max(handed)


def test_the_format_without_a_version_line_is_read(tmp_path: Path) -> None:
    (tmp_path / PRODUCER_ID_BLOCK).write_text("5000\n")
    assert ProducerIdManager(0, tmp_path).next_id() == 5000


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "does not parse"),
        ("\x00\x00\x00", "does not parse"),
        ("12ab\n", "does not parse"),
        ("1\n3\n", "does not parse"),
        ("2\n3\n4000\n", "does not parse"),  # a version this kctl does not know
        ("1\n7\n4000\n", "ids of broker 7, not of broker 3"),
        ("-5\n", "out of range"),
        (b"\xff\xfe".decode("latin-1"), "cannot be read"),
    ],
)
def test_a_damaged_file_is_refused_never_restarted_at_zero(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / PRODUCER_ID_BLOCK
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(CorruptProducerIdBlockError, match=reason):
        ProducerIdManager(3, tmp_path)
    assert path.read_bytes() == content.encode("latin-1"), "a refused file must be left as it was"


@pytest.mark.e2e  # starts `kctl broker start`
def test_a_broker_with_a_damaged_file_does_not_start_and_says_why(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / PRODUCER_ID_BLOCK).write_text("garbage\n")
    started = subprocess.run(
        [sys.executable, "-m", "kctl", "broker", "start", "-X", "listeners=PLAINTEXT://127.0.0.1:0",
         "-X", f"log.dirs={data}"],
        capture_output=True, text=True, timeout=60,
    )
    assert started.returncode == 1, started.stderr
    assert "producer-id-block does not parse" in started.stderr
    assert "Traceback" not in started.stderr
    assert (data / PRODUCER_ID_BLOCK).read_text() == "garbage\n"

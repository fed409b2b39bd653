"""The `kctl broker start` subprocess the client benchmarks (bench_clients.py, bench_consumer.py) run
their clients against: a fresh log directory, the bootstrap address it printed, its CPU time, and a
clean stop that removes the directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Broker:
    """A `kctl broker start` subprocess with a fresh log directory."""

    def __init__(self, partitions: int, prefix: str = "kctl-bench-") -> None:
        self.partitions = partitions
        self.directory = Path(tempfile.mkdtemp(prefix=prefix))
        command = [
            sys.executable, "-m", "kctl", "broker", "start",
            "-X", "listeners=PLAINTEXT://127.0.0.1:0",
            "-X", f"log.dirs={self.directory / 'data'}",
            "-X", f"num.partitions={partitions}",
        ]  # fmt: skip
        self.log = open(self.directory / "broker.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.log, cwd=ROOT)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if not line:
            raise RuntimeError(
                f"the broker did not start: {(self.directory / 'broker.log').read_text()[-2000:]}"
            )
        self.bootstrap = line.split(",")[0]

    def records(self, topic: str) -> int:
        """How many records the topic holds (the sum of its partitions' end offsets)."""
        from kctl.client import AdminClient, TopicPartition

        with AdminClient(self.bootstrap) as admin:
            partitions = [TopicPartition(topic, p) for p in range(self.partitions)]
            return sum(result.offset for result in admin.list_offsets(partitions, "latest").values())

    def cpu(self) -> float:
        """The broker process's CPU seconds so far (user + system)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)

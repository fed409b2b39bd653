#!/usr/bin/env python3
"""Protocol fuzzing benchmark (issue 17): the longer run of tests/broker/test_fuzz_protocol.py.

Starts one broker (``python -m kctl broker start``, a fresh log directory), creates a topic, and sends
``--frames`` mutants of the fuzzer's corpus (kctl.testing.fuzz: every API and version, client-like
frames with real record batches in every codec, structure-aware mutations) over ``--connections``
connections, with a health probe (ApiVersions + Metadata on a fresh connection) every
``--probe-every`` frames. Prints, per round and in total: frames/s, what became of the frames
(answered, connection closed, hangs), probe latency (p50, p99, max), the broker's RSS and open
descriptors (from /proc), and whether the broker survived; asserts nothing. Exit status 1 when the
broker crashed or a frame hung.

Usage: python bench/bench_fuzz.py [--frames 200000] [--seed 1] [--connections 8] [--rounds 4]"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import kctl.protocol as kp
from kctl.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from kctl.testing import BrokerProcess
from kctl.testing.fuzz import Fuzzer, corpus, process_figures, process_sockets


def _create_topic(bootstrap: str, name: str) -> None:
    import socket

    host, _, port = bootstrap.rpartition(":")
    body = CreateTopicsRequest(
        topics=[
            CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])
        ],
        timeout_ms=10_000,
        validate_only=False,
    )
    header = kp.RequestHeader(kp.ApiKey.CREATE_TOPICS, 5, 1, "bench-fuzz")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(kp.encode_request(header, body))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values) or [0.0]
    return ordered[min(int(len(ordered) * p), len(ordered) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200_000, help="mutants in all")
    parser.add_argument(
        "--rounds", type=int, default=4, help="rounds the frames are split into (a line each)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--probe-every", type=int, default=500)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="kctl-bench-fuzz-"))
    broker = BrokerProcess(base / "data", {"fetch.wait.max.ms": "100"}).start()
    failed = False
    try:
        assert broker.pid is not None
        _create_topic(broker.bootstrap, "fuzzed")
        frames = corpus("fuzzed", args.seed)
        rss0, fds0 = process_figures(broker.pid)
        print(f"# protocol fuzzing: {len(frames)} corpus frames, seed {args.seed}, {args.connections} conn")
        print(f"# broker at start: RSS {rss0 >> 20} MiB, {fds0} fds, {process_sockets(broker.pid)} sockets")
        header = (
            "round   frames  frames/s  answered  closed  hangs  probe p50/p99/max ms   RSS MiB  fds  alive"
        )
        print(header)
        total_frames = total_seconds = 0.0
        all_probes: list[float] = []
        per_round = max(args.frames // args.rounds, 1)
        for round_number in range(1, args.rounds + 1):
            fuzzer = Fuzzer(
                broker.bootstrap,
                broker.pid,
                frames,
                seed=args.seed * 1000 + round_number,
                connections=args.connections,
                probe_every=args.probe_every,
                alive=lambda: broker.running,
            )
            started = time.monotonic()
            try:
                report = fuzzer.run(per_round)
            except RuntimeError as error:
                print(f"# {error}")
                failed = True
                break
            elapsed = time.monotonic() - started
            total_frames += report.frames
            total_seconds += elapsed
            all_probes += report.probe_ms
            rss, fds = process_figures(broker.pid)
            print(
                f"{round_number:5d} {report.frames:8d} {report.frames / elapsed:9.0f} {report.answered:9d} "
                f"{report.closed:7d} {report.hangs:6d}  {_percentile(report.probe_ms, 0.5):6.1f}/"
                f"{_percentile(report.probe_ms, 0.99):6.1f}/{max(report.probe_ms):7.1f}   "
                f"{rss >> 20:7d} {fds:4d}  {'yes' if broker.running else 'NO'}"
            )
            failed = failed or report.hangs > 0 or not broker.running
        if total_seconds:
            print(
                f"# total: {int(total_frames)} frames in {total_seconds:.0f} s "
                f"({total_frames / total_seconds:.0f}/s), "
                f"crashes {0 if broker.running else 1}, probe p50 {_percentile(all_probes, 0.5):.1f} ms, "
                f"p99 {_percentile(all_probes, 0.99):.1f} ms, max {max(all_probes, default=0):.1f} ms"
            )
        log = broker.log_file.read_text(errors="replace")
        print(f"# unhandled exceptions in the broker log: {log.count('Traceback')}")
        failed = failed or "Traceback" in log
    finally:
        code = broker.stop()
        print(f"# broker stopped with exit status {code}")
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

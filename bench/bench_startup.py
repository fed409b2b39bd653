"""Start-up time of kctl's commands that need no broker: --version, --help at each level, the offline
log tools. Prints the median wall-clock and CPU time of each over interleaved rounds, next to
``python -c pass`` (the interpreter's own floor) and, if kcat is installed, ``kcat -V``.

Usage: python bench/bench_startup.py [--rounds 15] [--extra-path DIR]

``--extra-path DIR`` runs a second configuration with DIR first on PYTHONPATH (e.g. another typer
version installed with ``pip install --target DIR``) and prints both columns, interleaved round by
round so machine load falls on both alike.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_log_dir(directory: Path) -> Path:
    """A small partition directory for the log tools, written by kctl's own log layer."""
    sys.path.insert(0, str(ROOT))
    from kctl.common.topic_partition import TopicPartition
    from kctl.log.config import LogConfig
    from kctl.log.log import Log
    from kctl.records.builder import encode_batch

    partition = directory / "bench-0"
    log = Log(partition, TopicPartition("bench", 0), LogConfig(), needs_recovery=False)
    for _ in range(10):
        log.append(encode_batch([(int(time.time() * 1000), None, b"v" * 100, ())] * 100))
    log.close()
    return partition


def commands(log_dir: Path) -> dict[str, list[str]]:
    kctl = [sys.executable, "-m", "kctl"]
    found = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "kctl --version": [*kctl, "--version"],
        "kctl --help": [*kctl, "--help"],
        "kctl group --help": [*kctl, "group", "--help"],
        "kctl consume --help": [*kctl, "consume", "--help"],
        "kctl log verify --help": [*kctl, "log", "verify", "--help"],
        "kctl log verify DIR": [*kctl, "log", "verify", str(log_dir)],
        "kctl log dump DIR": [*kctl, "log", "dump", str(log_dir), "-f", "jsonl"],
    }
    if shutil.which("kcat"):
        found["kcat -V"] = ["kcat", "-V"]
    return found


def once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds) of one run; CPU time is what a loaded machine distorts least."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--extra-path", type=Path, default=None)
    args = parser.parse_args()
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    base_env = {**os.environ, "PYTHONPATH": pythonpath}
    configs = {"kctl": base_env}
    if args.extra_path is not None:
        extra = f"{args.extra_path}{os.pathsep}{pythonpath}"
        configs[f"with {args.extra_path}"] = {**base_env, "PYTHONPATH": extra}
    with tempfile.TemporaryDirectory() as tmp:
        table = commands(make_log_dir(Path(tmp)))
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {
            (n, c): [] for n in table for c in configs
        }
        for _ in range(args.rounds):
            for name, argv in table.items():
                for config, env in configs.items():
                    samples[(name, config)].append(once(argv, env))
    print(f"start-up, median of {args.rounds} interleaved rounds: wall-clock ms / CPU ms")
    print(f"{'command':<28}" + "".join(f"{c:>26}" for c in configs))
    for name in table:
        cells = []
        for config in configs:
            walls, cpus = zip(*samples[(name, config)], strict=True)
            cells.append(f"{statistics.median(walls) * 1000:.0f} / {statistics.median(cpus) * 1000:.0f}")
        print(f"{name:<28}" + "".join(f"{cell:>26}" for cell in cells))


if __name__ == "__main__":
    main()

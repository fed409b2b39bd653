"""A seeded generator of partition damage and the exact-valid-prefix check, shared by
tests/log/test_corruption_suite.py (thousands of cases in seconds) and bench/bench_corruption.py.

A *template* partition directory is written once (several segments of small batches, indexes,
clean-shutdown state). Each case copies it, applies one seeded :class:`Damage` — bit flips,
truncations, garbage appended or overwritten, zeroed regions, damaged or missing indexes, orphan
``.swap`` / ``.cleaned`` / ``.deleted`` files — and then either runs the offline tool
(``kctl log recover``'s :func:`kctl.log.tools.recover`) or loads the log as the broker does at start
(:class:`kctl.log.manager.LogManager`, after a clean or an unclean stop).

The rule checked (exact valid prefix): every original batch that lies wholly before the first damaged
byte (in log order) is still there, byte for byte, at its offsets (nothing valid is lost); every batch
left is valid (framing, CRC-32C, offsets rising) and is one of the damaged files' batches (nothing is
made up); reads through the loaded log return exactly those batches; the offline tool's report counts
every byte it removed and saved each in a side file. After a *clean* stop only damage at the end of a
segment is detectable without a scan (as in Kafka), so the start-up mode with the clean marker draws
only tail damage."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kctl.common.topic_partition import TopicPartition
from kctl.log.config import LogConfig
from kctl.log.manager import LogManager
from kctl.log.naming import CLEAN_SHUTDOWN_FILE, partition_dir_name
from kctl.log.tools import recover
from kctl.records.builder import RecordBatchBuilder
from kctl.records.header import HEADER_SIZE, InvalidRecordBatch, parse_header, validate_batch

TP = TopicPartition("corrupt", 0)
T0 = 1_700_000_000_000

DATA_KINDS = ("bit_flip", "truncate", "garbage_append", "garbage_overwrite", "zero_region", "header_flip")
TAIL_KINDS = ("tail_garbage", "tail_truncate", "tail_flip", "tail_magic")
SIDE_KINDS = (
    "index_flip",
    "index_truncate",
    "index_missing",
    "orphan_swap",
    "orphan_cleaned",
    "orphan_deleted",
)


@dataclass(frozen=True)
class Batch:
    segment: int  # index of its segment file
    position: int
    data: bytes
    base_offset: int
    last_offset: int


@dataclass
class Template:
    """The pristine log dir and what it holds."""

    log_dir: Path
    segments: list[str]  # relative to the partition dir: file names in offset order
    batches: list[Batch]
    config: LogConfig

    @property
    def partition(self) -> Path:
        return self.log_dir / partition_dir_name(TP)


@dataclass
class Damage:
    kind: str
    file: str
    detail: str
    first_damaged: tuple[int, int] | None  # (segment index, byte position) in the .log files, or None


@dataclass
class CaseResult:
    damage: Damage
    lost_records: int = 0
    problems: list[str] = field(default_factory=list)


def build_template(
    directory: Path, *, segments: int = 4, batches_per_segment: int = 4, records: int = 5
) -> Template:
    """Write the template partition (closed cleanly) under ``directory``."""
    rng = random.Random(0)
    probe = _batch(rng, 0, records)
    config = LogConfig(
        segment_bytes=len(probe) * batches_per_segment + 1, index_interval_bytes=len(probe) // 2
    )
    log_dir = directory / "template"
    with LogManager([log_dir], default_config=config) as manager:
        log = manager.get_or_create_log(TP)
        for number in range(segments * batches_per_segment):
            log.append(_batch(rng, number, records))
    partition = log_dir / partition_dir_name(TP)
    files = sorted(p.name for p in partition.glob("*.log"))
    batches = []
    for segment_number, name in enumerate(files):
        data = (partition / name).read_bytes()
        position = 0
        while position < len(data):
            header = parse_header(data, position)
            batches.append(
                Batch(
                    segment_number,
                    position,
                    data[position : position + header.size],
                    header.base_offset,
                    header.last_offset,
                )
            )
            position += header.size
    return Template(log_dir, files, batches, config)


def _batch(rng: random.Random, number: int, records: int) -> bytes:
    builder = RecordBatchBuilder(compression=rng.choice(["none", "none", "gzip", "lz4"]))
    for i in range(records):
        builder.append(T0 + number * 10 + i, b"key-%d" % i, rng.randbytes(rng.randint(5, 60)))
    return builder.build()


def copy_template(template: Template, target: Path) -> Path:
    """A fresh copy of the template log dir at ``target`` (its partition dir is returned)."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(template.log_dir, target)
    return target / partition_dir_name(TP)


# -- damage --------------------------------------------------------------------------------------
def apply_damage(rng: random.Random, partition: Path, template: Template, kinds: tuple[str, ...]) -> Damage:
    kind = rng.choice(kinds)
    number = rng.randrange(len(template.segments))
    if kind.startswith("tail_"):
        number = len(template.segments) - 1
    path = partition / template.segments[number]
    data = bytearray(path.read_bytes())
    size = len(data)
    last = template.batches[-1] if kind.startswith("tail_") else None
    if kind == "bit_flip":
        position = rng.randrange(size)
        data[position] ^= 1 << rng.randrange(8)
        return _write(path, data, Damage(kind, path.name, f"bit at {position}", (number, position)))
    if kind in ("truncate", "tail_truncate"):
        position = rng.randrange(last.position if last else 0, size)
        return _write(
            path, data[:position], Damage(kind, path.name, f"cut at {position}", (number, position))
        )
    if kind in ("garbage_append", "tail_garbage"):
        garbage = rng.randbytes(rng.choice([1, 7, 60, 61, 62, 200, 5000]))
        return _write(path, data + garbage, Damage(kind, path.name, f"{len(garbage)} bytes", (number, size)))
    if kind in ("garbage_overwrite", "zero_region"):
        position = rng.randrange(size)
        length = min(rng.randint(1, 300), size - position)
        data[position : position + length] = (
            rng.randbytes(length) if kind == "garbage_overwrite" else bytes(length)
        )
        if data == bytearray(path.read_bytes()):
            return Damage(kind, path.name, "no change", None)
        return _write(
            path, data, Damage(kind, path.name, f"{length} bytes at {position}", (number, position))
        )
    if kind in ("header_flip", "tail_flip", "tail_magic"):
        batch = last or rng.choice([b for b in template.batches if b.segment == number])
        offset = (
            16
            if kind == "tail_magic"
            else rng.randrange(HEADER_SIZE if kind == "header_flip" else len(batch.data))
        )
        position = batch.position + offset
        data[position] ^= rng.randrange(1, 256)
        return _write(
            path,
            data,
            Damage(kind, path.name, f"byte {offset} of the batch at {batch.position}", (number, position)),
        )
    return _side_damage(rng, kind, partition, path, number)


def _side_damage(rng: random.Random, kind: str, partition: Path, path: Path, number: int) -> Damage:
    stem = path.name.removesuffix(".log")
    if kind.startswith("index_"):
        index = partition / (stem + rng.choice([".index", ".timeindex"]))
        if kind == "index_missing":
            index.unlink(missing_ok=True)
        elif index.exists() and index.stat().st_size:
            data = bytearray(index.read_bytes())
            if kind == "index_flip":
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            else:
                data = data[: rng.randrange(len(data))]
            index.write_bytes(data)
        return Damage(kind, index.name, "", None)
    suffix = {"orphan_swap": ".log.swap", "orphan_cleaned": ".log.cleaned", "orphan_deleted": ".log.deleted"}[
        kind
    ]
    orphan = partition / (stem + suffix)
    source = path.read_bytes()
    if kind == "orphan_swap" and rng.random() < 0.5:
        content = source[: rng.randrange(1, max(2, len(source)))]  # a partial copy: must be set aside
        try:  # a cut that lands on a batch boundary is a valid compaction output: avoid it
            validate_whole(content)
            content += b"\x00"
        except InvalidRecordBatch:
            pass
    else:
        content = rng.randbytes(rng.randint(1, 2000))
    orphan.write_bytes(content)
    return Damage(kind, orphan.name, f"{len(content)} bytes", None)


def validate_whole(data: bytes) -> None:
    position = 0
    while position < len(data):
        position += validate_batch(data, position).size


def _write(path: Path, data: bytes | bytearray, damage: Damage) -> Damage:
    path.write_bytes(bytes(data))
    return damage


# -- checks --------------------------------------------------------------------------------------
def _expected_prefix(template: Template, damage: Damage) -> list[Batch]:
    if damage.first_damaged is None:
        return list(template.batches)
    segment, position = damage.first_damaged
    return [b for b in template.batches if (b.segment, b.position + len(b.data)) <= (segment, position)]


def _check_batches(partition: Path, template: Template, damage: Damage, result: CaseResult) -> list[bytes]:
    """The batches left in the partition's .log files, checked against the rule."""
    found: list[bytes] = []
    previous_last = -1
    for path in sorted(partition.glob("*.log")):
        data = path.read_bytes()
        position = 0
        while position < len(data):
            try:
                header = validate_batch(data, position)
            except InvalidRecordBatch as error:
                result.problems.append(f"{path.name}: an invalid batch was kept at {position}: {error}")
                return found
            if header.base_offset <= previous_last:
                result.problems.append(f"{path.name}: offsets do not rise at {position}")
            previous_last = header.last_offset
            found.append(data[position : position + header.size])
            position += header.size
    kept = set(found)
    for batch in _expected_prefix(template, damage):
        if batch.data not in kept:
            result.lost_records += batch.last_offset - batch.base_offset + 1
    if result.lost_records:
        result.problems.append(f"{result.lost_records} records of the valid prefix were lost")
    return found


def check_offline(partition: Path, template: Template, damage: Damage) -> CaseResult:
    """``recover`` the damaged partition and check the rule and the report's byte count."""
    result = CaseResult(damage)
    before = sum(p.stat().st_size for p in partition.glob("*.log"))
    swaps = sum(p.stat().st_size for p in partition.glob("*.log.swap"))
    report = recover(partition, config=template.config)
    found = _check_batches(partition, template, damage, result)
    kept = sum(len(b) for b in found)
    saved = sum(Path(side).stat().st_size for side in report.side_files.values())
    saved += sum(Path(kept_as).stat().st_size for *_, kept_as in report.set_aside)
    if report.kept_bytes != kept and not report.set_aside and damage.kind != "orphan_swap":
        result.problems.append(f"report says {report.kept_bytes} bytes kept, the files hold {kept}")
    if kept + report.cut_bytes < before and damage.kind != "orphan_swap":
        result.problems.append(f"{before - kept - report.cut_bytes} bytes removed but not counted")
    if saved < report.cut_bytes:
        result.problems.append(f"{report.cut_bytes} bytes cut, only {saved} saved")
    if (
        damage.kind == "orphan_swap"
        and swaps
        and not report.set_aside
        and found != [b.data for b in template.batches]
    ):
        result.problems.append("a swap file was trusted")
    return result


def check_startup(log_dir: Path, template: Template, damage: Damage, *, clean: bool) -> CaseResult:
    """Load the damaged log dir as the broker does (clean marker kept or removed) and check the rule
    on what the log serves, then append and reopen."""
    result = CaseResult(damage)
    marker = log_dir / CLEAN_SHUTDOWN_FILE
    if not clean:
        marker.unlink(missing_ok=True)
        (log_dir / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    manager = LogManager([log_dir], default_config=template.config)
    try:
        log = manager.get_log(TP)
        assert log is not None
        served = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read_bytes(offset, 1 << 20)
            if not data:
                break
            position = 0
            while position + HEADER_SIZE <= len(data):
                header = parse_header(data, position)
                if position + header.size > len(data):
                    break
                served.append(data[position : position + header.size])
                offset = header.next_offset
                position += header.size
        kept = set(served)
        for batch in _expected_prefix(template, damage):
            if batch.data not in kept:
                result.lost_records += batch.last_offset - batch.base_offset + 1
        if result.lost_records:
            result.problems.append(f"{result.lost_records} records of the valid prefix are not served")
        end = log.log_end_offset
        log.append(_batch(random.Random(1), 99, 2))
        if log.log_end_offset != end + 2:
            result.problems.append("an append after recovery did not continue the log")
    finally:
        manager.close()
    files = CaseResult(damage)  # the files left are valid batches (the prefix was checked on reads)
    _check_batches(log_dir / partition_dir_name(TP), template, Damage("files", "", "", (0, 0)), files)
    result.problems += files.problems
    with LogManager([log_dir], default_config=template.config) as reopened:
        log = reopened.get_log(TP)
        if log is None or log.recovery_plan:
            result.problems.append("the log needed recovery again after a clean stop")
    return result


@dataclass
class Summary:
    cases: int = 0
    lost_records: int = 0
    crashed: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def run_cases(
    template: Template,
    workdir: Path,
    *,
    seed: int,
    count: int,
    mode: str,
    on_case: Callable[[CaseResult], None] | None = None,
) -> Summary:
    """Run ``count`` seeded cases in ``mode`` ('offline', 'startup-unclean' or 'startup-clean')."""
    summary = Summary()
    kinds = {
        "offline": DATA_KINDS + TAIL_KINDS + SIDE_KINDS,
        "startup-unclean": DATA_KINDS + TAIL_KINDS + SIDE_KINDS,
        "startup-clean": TAIL_KINDS + SIDE_KINDS,
    }[mode]
    for case in range(count):
        rng = random.Random(f"{seed}-{mode}-{case}")
        target = workdir / "case"
        partition = copy_template(template, target)
        damage = apply_damage(rng, partition, template, kinds)
        try:
            if mode == "offline":
                result = check_offline(partition, template, damage)
            else:
                result = check_startup(target, template, damage, clean=mode == "startup-clean")
        except Exception as error:
            summary.crashed += 1
            summary.failures.append(f"case {case} {damage}: crashed: {type(error).__name__}: {error}")
            continue
        summary.cases += 1
        summary.by_kind[damage.kind] = summary.by_kind.get(damage.kind, 0) + 1
        summary.lost_records += result.lost_records
        if result.problems:
            summary.failures.append(f"case {case} {damage}: {'; '.join(result.problems)}")
        if on_case is not None:
            on_case(result)
    shutil.rmtree(workdir / "case", ignore_errors=True)
    return summary

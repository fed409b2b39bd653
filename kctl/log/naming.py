"""Every file and directory name of the on-disk layout, in one place: ``<topic>_<partition>/``
partition directories (and their ``-delete`` and ``-future`` forms), segment files named by their
20-digit base offset (``.log``, ``.index``, ``.timeindex``, ``.txnindex``, and the ``.cleaned``,
``.swap``, ``.deleted`` forms of compaction and deletion), producer snapshots named by the 20-digit
offset their state covers (``.snapshot``; not segment files), a partition's leader-epoch checkpoint,
and the files of a log dir: the four offset checkpoints, ``meta.properties``, the ``.lock``, the
clean-shutdown marker and the broker's ``producer-id-block``. The modules that read and write them
(kctl.log.checkpoint, manager, leader_epoch, dir_move, kctl.broker.producer_ids) take the names from
here. ``TopicPartition`` lives in ``kctl.common.topic_partition`` (imported here for the functions
below; import it from there)."""

from __future__ import annotations

import re
from pathlib import Path

from kctl.common.topic_partition import TopicPartition

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions whose marker is in the segment (kctl.log.transactions)
SNAPSHOT_SUFFIX = ".snapshot"  # idempotent-producer state as of an offset (kctl.log.producer_state)
CLEANED_SUFFIX = ".cleaned"  # a compaction output being written; deleted on recovery
SWAP_SUFFIX = ".swap"  # a finished compaction output waiting to replace segments; completed on recovery
DELETED_SUFFIX = ".deleted"  # a segment scheduled for deletion
DELETE_DIR_SUFFIX = "-delete"  # a partition directory scheduled for deletion
FUTURE_DIR_SUFFIX = "-future"  # a partition's copy being built in another log dir (kctl.log.dir_move)
TEMPORARY_SUFFIX = ".tmp"  # a file being written, renamed over its name once complete

# a partition directory's own file
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"  # kctl.log.leader_epoch

# a log dir's files (kctl.log.manager, kctl.log.checkpoint)
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # each partition's high watermark
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"  # held by the broker using the log dir (also read by kctl.localcluster.processes)
CLEAN_SHUTDOWN_FILE = ".kctl_cleanshutdown"
PRODUCER_ID_BLOCK = "producer-id-block"  # the broker's producer id allocation (kctl.broker.producer_ids)
OFFSET_DIGITS = 20

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)_(?P<partition>0|[1-9][0-9]*)$")


def validate_topic_name(topic: str) -> None:
    """Raise ValueError unless ``topic`` is a legal Kafka topic name."""
    if not topic:
        raise ValueError("topic name is empty")
    if topic in (".", ".."):
        raise ValueError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError(f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _LEGAL_TOPIC.match(topic):
        raise ValueError(
            f"topic name {topic!r} is illegal: only ASCII letters, digits, '.', '_' and '-' are allowed"
        )


def partition_dir_name(tp: TopicPartition) -> str:
    """The partition directory's name, ``<topic>_<partition>`` (str(tp) is the display form, ``topic-0``)."""
    return f"{tp.topic}_{tp.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``my_topic_0`` -> TopicPartition("my_topic", 0); None for anything else."""
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return TopicPartition(match["topic"], int(match["partition"]))


def offset_file_name(offset: int) -> str:
    return f"{offset:0{OFFSET_DIGITS}d}"


def log_file(directory: Path, base_offset: int) -> Path:
    return directory / (offset_file_name(base_offset) + LOG_SUFFIX)


def index_file(directory: Path, base_offset: int) -> Path:
    return directory / (offset_file_name(base_offset) + INDEX_SUFFIX)


def time_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (offset_file_name(base_offset) + TIME_INDEX_SUFFIX)


def txn_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (offset_file_name(base_offset) + TXN_INDEX_SUFFIX)


def snapshot_file(directory: Path, offset: int) -> Path:
    return directory / (offset_file_name(offset) + SNAPSHOT_SUFFIX)


def base_offset_of(path: Path) -> int | None:
    """The base offset a segment-family file is named by, or None if the name is not 20 digits.
    (A ``.snapshot`` file's 20 digits are the offset of its producer state; check the suffix.)"""
    stem = path.name.split(".", 1)[0]
    if len(stem) != OFFSET_DIGITS or not stem.isdigit():
        return None
    return int(stem)

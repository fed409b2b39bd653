"""One transactional read-process-write copier of the exactly-once checker (kctl.testing.jepsen_eos),
run as a process of its own so the nemesis can SIGKILL it: ``python -m kctl.testing.jepsen_eos_copier``.

It copies its input partitions (a fixed share of the input topic) to the same partitions of the
output topic with kctl's own client: a ``GroupConsumer`` of the shared group with ``assign`` and
``isolation.level=read_committed``, a producer with ``transactional.id`` = its slot's id (a copier
restarted after a kill fences and aborts what its predecessor left open). Each poll is one
transaction: the records, each value tagged ``<input value>|<transaction name>``, and the group's
offsets (send_offsets_to_transaction). A seeded share of transactions (and always the second of
each run) is aborted on purpose, the positions then rewound, so aborted records exist for the
checker to look for.

Every outcome is appended to ``--log`` as one JSON line: ``{"txn": name, "outcome": "committed" |
"aborted", "records": n}`` once the coordinator answered, ``{"error": ...}`` before exiting 3 on any
error (the supervisor restarts it). It exits 0 once ``--stop-file`` exists and its positions reached
the input's end offsets read after that.

``--sabotage``: commit the offsets with the consumer outside the transaction and do not rewind after
an abort, which loses the aborted records: the checker must report them lost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from kctl.client.group import GroupConsumer
from kctl.client.producer import Producer
from kctl.client.types import TopicPartition

TIMEOUT = 60.0


def transactional_id(slot: int) -> str:
    """The ``transactional.id`` of copier slot ``slot`` (the same across its restarts)."""
    return f"jepsen-eos-copier-{slot}"


def _log(path: Path, entry: dict[str, Any]) -> None:
    with open(path, "a") as handle:
        handle.write(json.dumps(entry) + "\n")
        handle.flush()


def copy(args: argparse.Namespace) -> int:
    log = Path(args.log)
    producer = Producer(
        args.bootstrap,
        {
            "transactional.id": transactional_id(args.slot),
            "linger.ms": "5",
            "transaction.timeout.ms": "30000",
            "delivery.timeout.ms": "60000",
        },
    )
    producer.init_transactions(TIMEOUT)
    consumer = GroupConsumer(
        args.bootstrap,
        {
            "group.id": args.group,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        },
    )
    tps = [TopicPartition(args.input, int(p)) for p in args.partitions.split(",")]
    consumer.assign(tps)
    rng = random.Random(f"{args.seed}-{args.slot}-{os.getpid()}")
    ends: dict[TopicPartition, int] | None = None
    serial = 0
    try:
        while True:
            before = {tp: consumer.position(tp) for tp in tps}
            if ends is None and Path(args.stop_file).exists():
                ends = consumer.end_offsets(tps)  # the input is complete once the stop file exists
            if ends is not None and all(before[tp] >= ends[tp] for tp in tps):
                return 0
            records = consumer.poll(0.5, max_records=args.batch)
            if not records:
                continue
            name = f"{args.slot}.{os.getpid()}.{serial}"
            serial += 1
            producer.begin_transaction()
            offsets: dict[TopicPartition, int] = {}
            for record in records:
                value = f"{record.value.decode() if record.value else ''}|{name}"
                producer.send(args.output, value.encode(), key=record.key, partition=record.partition)
                offsets[TopicPartition(record.topic, record.partition)] = record.offset + 1
            if args.sabotage:
                consumer.commit(offsets)  # outside the transaction: survives its abort
            else:
                producer.send_offsets_to_transaction(offsets, args.group, TIMEOUT)
            if (serial == 2 and args.abort_ratio > 0) or rng.random() < args.abort_ratio:
                producer.abort_transaction(TIMEOUT)
                _log(log, {"txn": name, "outcome": "aborted", "records": len(records)})
                if not args.sabotage:
                    for tp, offset in before.items():
                        consumer.seek(tp, offset)
            else:
                producer.commit_transaction(TIMEOUT)
                _log(log, {"txn": name, "outcome": "committed", "records": len(records)})
    finally:
        consumer.close()
        producer.close(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--slot", type=int, required=True)
    parser.add_argument("--partitions", required=True, help="input partitions, comma-separated")
    parser.add_argument("--log", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--abort-ratio", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--sabotage", action="store_true")
    args = parser.parse_args(argv)
    try:
        return copy(args)
    except Exception as error:  # a broker died, a coordinator moved: the supervisor restarts us
        _log(Path(args.log), {"error": repr(error)[:500], "pid": os.getpid()})
        return 3


if __name__ == "__main__":
    sys.exit(main())

"""The console consumer: read records from assigned partitions up to each one's range end (or
forever, or a count), or as a member of a consumer group, handing each record to the caller.

Offset ranges come from `kctl.client.offsets_spec`; `default_spec` is the start the console
consumer takes without `--offset`. A partition whose end is reached is paused; the loop ends when
every bounded partition is done and none is unbounded. `on_idle` is called after a poll that
returned nothing (the CLI checks there whether its reader went away), `flush` after the records of
each poll were handed over (the CLI writes them out in one piece there). A group member can drain
its partitions to the end offsets it sees when they are assigned (`GroupDrain`, `kcat -G ... -e`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kctl.client import GroupConsumer, TopicPartition
from kctl.client.consumer import Consumer, ConsumerRecord
from kctl.client.group.state import MemberState
from kctl.client.offsets_spec import OffsetRange
from kctl.client.zkgroup import ZkGroupConsumer

RecordSink = Callable[[ConsumerRecord], None]


def default_spec(offset: str | None, until: str | None) -> str:
    """The start without an explicit one: `end` (new records, as kcat and kafka-console-consumer
    do), but `beginning` when an end is given (`--until end` alone dumps what is there)."""
    if offset is not None:
        return offset
    return "beginning" if until is not None else "end"


def _nothing() -> None:
    pass


class ReadLoop:
    """Polls the consumer and hands records to `write` until every partition reached its range's
    end, `max_records` records were written, or forever. A partition whose end is reached is paused."""

    def __init__(
        self,
        consumer: Consumer,
        ranges: dict[TopicPartition, OffsetRange],
        write: RecordSink,
        max_records: int | None,
        on_idle: Callable[[], None] = _nothing,
        flush: Callable[[], None] = _nothing,
    ) -> None:
        self.consumer = consumer
        self.write = write
        self.max_records = max_records
        self.on_idle = on_idle
        self.flush = flush
        self.count = 0
        self.bounded = {
            tp: r for tp, r in ranges.items() if r.stop is not None or r.stop_timestamp is not None
        }
        self.follow = len(self.bounded) < len(ranges)  # some partition has no end
        self.done: set[TopicPartition] = {tp for tp, r in self.bounded.items() if r.empty}

    def finished(self) -> bool:
        if self.max_records is not None and self.count >= self.max_records:
            return True
        return not self.follow and len(self.done) >= len(self.bounded)

    def _finish(self, tp: TopicPartition) -> None:
        self.done.add(tp)
        self.consumer.pause([tp])

    def run(self) -> int:
        """Read until finished; returns the number of records written."""
        consumer, write, bounded, done = self.consumer, self.write, self.bounded, self.done
        if self.done:
            consumer.pause(list(self.done))
        while not self.finished():
            self.flush()
            records = consumer.poll(1.0)
            if not records:
                self.on_idle()
            for record in records:
                end = None
                if bounded:
                    tp = TopicPartition(record.topic, record.partition)
                    if tp in done:
                        continue
                    end = bounded.get(tp)
                    if end is not None and end.reached(record.offset, record.timestamp):
                        self._finish(tp)
                        continue
                write(record)
                self.count += 1
                if self.max_records is not None and self.count >= self.max_records:
                    self.flush()
                    return self.count
                if end is not None and end.stop is not None and record.offset + 1 >= end.stop:
                    self._finish(tp)
            for tp, end in bounded.items():  # ends reached without a record (control batches, gaps)
                if tp not in done and end.stop is not None and consumer.position(tp) >= end.stop:
                    self._finish(tp)
        self.flush()
        return self.count


class GroupDrain:
    """Draining a group member's partitions (`--until end`): each assigned partition's end offset is
    looked up when the member first holds it (after the poll that assigned it; a partition given
    away forgets its end, and gets a new one if it comes back). A record at or past its partition's
    end is not handed on: the partition goes back to the end and is paused, so what is committed
    never passes the end. Finished when the member is stable in its group (joined, no rebalance
    under way) and every partition it holds is at its end — at once when it holds none."""

    def __init__(self, consumer: GroupConsumer) -> None:
        self.consumer = consumer
        self.ends: dict[TopicPartition, int] = {}

    def update(self) -> None:
        """Forget the partitions given away; look up the end offsets of those newly assigned."""
        assigned = self.consumer.assignment()
        for tp in [tp for tp in self.ends if tp not in assigned]:
            del self.ends[tp]
        new = sorted(tp for tp in assigned if tp not in self.ends)
        if new:
            self.ends.update(self.consumer.end_offsets(new))

    def past_end(self, record: ConsumerRecord) -> bool:
        """Whether ``record`` lies at or past its partition's end (the partition is then stopped)."""
        tp = TopicPartition(record.topic, record.partition)
        end = self.ends.get(tp)
        if end is None or record.offset < end:
            return False
        self.consumer.seek(tp, end)
        self.consumer.pause([tp])
        return True

    def finished(self) -> bool:
        membership = self.consumer.membership
        if membership.state is not MemberState.STABLE or membership.rebalance_in_progress:
            return False
        self.update()
        return all(self.consumer.position(tp) >= end for tp, end in self.ends.items())


def consume_as_group(
    bootstrap: str,
    properties: dict[str, str],
    names: Sequence[str],
    pattern: str | None,
    write: RecordSink,
    max_records: int | None,
    on_idle: Callable[[], None] = _nothing,
    flush: Callable[[], None] = _nothing,
    *,
    until_end: bool = False,
) -> int:
    """Read as a member of the group (`properties` has group.id) the named topics or those matching
    `pattern` until `max_records` or an interrupt — or, with ``until_end``, until every partition the
    member holds reached the end offset seen when it was assigned (``GroupDrain``); offsets are
    committed as it goes (enable.auto.commit) and when it leaves the group. With zookeeper.connect
    in `properties` the group is ZooKeeper-coordinated (`ZkGroupConsumer`; not with ``until_end``).
    `flush` is called after the records of each poll were handed to `write`. Returns the number of
    records written."""
    count = 0
    zookeeper = bool(properties.get("zookeeper.connect"))
    if zookeeper and until_end:
        raise ValueError("draining to the end needs a broker-coordinated group, not a ZooKeeper one")
    consumer = ZkGroupConsumer(bootstrap, properties) if zookeeper else GroupConsumer(bootstrap, properties)
    drain = GroupDrain(consumer) if isinstance(consumer, GroupConsumer) and until_end else None
    with consumer:
        if pattern is not None:
            consumer.subscribe(pattern=pattern)
        else:
            consumer.subscribe(list(names))
        while max_records is None or count < max_records:
            flush()
            if drain is not None and drain.finished():
                break
            records = consumer.poll(1.0, max_records=None if max_records is None else max_records - count)
            if drain is not None:
                drain.update()
            if not records:
                on_idle()
            for record in records:
                if drain is not None and drain.past_end(record):
                    continue
                write(record)
                count += 1
        flush()
        consumer.commit()
    return count

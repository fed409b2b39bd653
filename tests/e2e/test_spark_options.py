"""The Spark data source's option parsing and range planning, and the load's one-at-a-time rule,
without Spark or a broker: Spark's Kafka option names and rules, named clusters, ``minPartitions``
splits and ``maxOffsetsPerTrigger`` limits."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from kctl.client import TopicPartition
from kctl.spark.options import OffsetBound, SourceOptionError, offsets_from_json, offsets_json, parse_options
from kctl.spark.planning import OffsetRange, limit_offsets, plan_ranges

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_kafka_option_names_case_insensitive_and_client_properties() -> None:
    options = parse_options(
        BOOT
        | {
            "Subscribe": "a, b",
            "STARTINGOFFSETS": '{"a": {"0": 5, "1": -2}, "b": {"0": -1}}',
            "endingOffsets": "latest",
            "minPartitions": "8",
            "includeHeaders": "TRUE",
            "failOnDataLoss": "false",
            "kafka.client.id": "job-1",
            "kafka.fetch.max.bytes": "1000000",
        }
    )
    assert options.subscribe == ("a", "b")
    assert options.starting == OffsetBound("offsets", offsets={A0: 5, A1: -2, B0: -1})
    assert options.ending == OffsetBound("latest")
    assert (options.min_partitions, options.include_headers, options.fail_on_data_loss) == (8, True, False)
    assert options.client_properties == {"client.id": "job-1", "fetch.max.bytes": "1000000"}


def test_defaults_differ_for_batch_and_streaming() -> None:
    assert parse_options(BOOT | {"subscribe": "a"}).starting == OffsetBound("earliest")
    assert parse_options(BOOT | {"subscribe": "a"}, streaming=True).starting == OffsetBound("latest")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers is required"),
        (BOOT, "one of the options subscribe"),
        (BOOT | {"subscribe": "a", "assign": '{"a": [0]}'}, "only one of"),
        (BOOT | {"subscribePattern": "("}, "not a valid regex"),
        (BOOT | {"subscribe": "a", "endingOffsets": "earliest"}, "not a valid ending offset"),
        (BOOT | {"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, "not valid here"),
        (BOOT | {"subscribe": "a", "startingOffsets": "{oops"}, "not valid JSON"),
        (BOOT | {"subscribe": "a", "minPartitions": "0"}, "positive integer"),
        (BOOT | {"subscribe": "a", "includeHeaders": "yes"}, "true or false"),
        (BOOT | {"assign": '{"a": "0"}'}, "list of partitions"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(SourceOptionError, match=message):
        parse_options(options)


def test_streaming_refuses_ending_offsets_and_writing_needs_no_subscription() -> None:
    with pytest.raises(SourceOptionError, match="batch queries only"):
        parse_options(BOOT | {"subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    assert parse_options(BOOT | {"topic": "out"}, writing=True).topic == "out"


def test_timestamps_and_pattern() -> None:
    options = parse_options(BOOT | {"subscribePattern": "or.*", "startingTimestamp": "1700000000000"})
    assert options.starting == OffsetBound("timestamp", timestamp=1_700_000_000_000)
    assert options.matches("orders") and not options.matches("xorders")
    by_partition = parse_options(
        BOOT | {"assign": '{"a": [0]}', "startingOffsetsByTimestamp": '{"a": {"0": 7}}'}
    )
    assert by_partition.starting == OffsetBound("timestamp", timestamps={A0: 7})


def test_offsets_json_round_trip() -> None:
    offsets = {A1: 3, A0: 10, B0: 0}
    assert offsets_json(offsets) == {"a": {"0": 10, "1": 3}, "b": {"0": 0}}
    assert offsets_from_json(offsets_json(offsets)) == offsets


def test_one_range_per_partition_without_empty_ones() -> None:
    ranges = plan_ranges({A0: 0, A1: 5, B0: 7}, {A0: 100, A1: 5, B0: 9})
    assert ranges == [OffsetRange("a", 0, 0, 100), OffsetRange("b", 0, 7, 9)]


def test_min_partitions_splits_in_proportion_and_covers_every_offset_once() -> None:
    starts, ends = {A0: 0, A1: 0, B0: 10}, {A0: 1000, A1: 100, B0: 13}
    ranges = plan_ranges(starts, ends, min_partitions=12)
    assert len(ranges) >= 12
    for tp in (A0, A1, B0):
        mine = sorted(r for r in ranges if r.topic_partition == tp)
        assert mine[0].from_offset == starts[tp] and mine[-1].until_offset == ends[tp]
        assert all(x.until_offset == y.from_offset for x, y in itertools.pairwise(mine))
    tasks = {tp: sum(1 for r in ranges if r.topic_partition == tp) for tp in (A0, A1, B0)}
    assert tasks[A0] > tasks[A1] >= tasks[B0] >= 1
    assert plan_ranges(starts, ends, min_partitions=2) == plan_ranges(starts, ends)  # enough already


def test_max_offsets_per_trigger_spreads_over_the_backlog() -> None:
    starts, ends = {A0: 0, A1: 50, B0: 5}, {A0: 300, A1: 150, B0: 5}
    limited = limit_offsets(starts, ends, 40)
    assert limited == {A0: 30, A1: 60, B0: 5}
    assert limit_offsets(starts, ends, 10_000) == ends


def test_a_named_cluster_gives_its_servers_and_properties(tmp_path: Path, monkeypatch: Any) -> None:
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[secure]\nbootstrap.servers = "10.0.0.1:9093,10.0.0.2:9093"\n'
        '"security.protocol" = "SASL_PLAINTEXT"\n"sasl.mechanism" = "PLAIN"\n"client.id" = "from-file"\n'
    )
    options = parse_options(
        {"kafka.bootstrap.servers": "secure", "clustersFile": str(clusters), "subscribe": "a",
         "kafka.client.id": "from-option"}
    )
    assert (options.bootstrap_servers, options.cluster_name) == ("10.0.0.1:9093,10.0.0.2:9093", "secure")
    assert options.client_properties == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "client.id": "from-option"
    }
    monkeypatch.setenv("KCTL_CLUSTERS", str(clusters))  # the CLI's lookup: KCTL_CLUSTERS, then ~/.config
    assert parse_options({"kafka.bootstrap.servers": "secure", "subscribe": "a"}).cluster_name == "secure"
    plain = parse_options({"kafka.bootstrap.servers": "broker1:9092", "subscribe": "a"})
    assert (plain.bootstrap_servers, plain.cluster_name) == ("broker1:9092", None)
    with pytest.raises(SourceOptionError, match="clusters file not found"):
        parse_options({"kafka.bootstrap.servers": "dc1", "clustersFile": str(tmp_path / "none.toml"),
                       "subscribe": "a"})


def test_one_load_at_a_time_into_a_destination(tmp_path: Path) -> None:
    """A second ``kctl spark load`` into the same PATH fails at once (it would remove the running
    one's staging directory); once the first is gone, a load goes ahead and clears dead staging."""
    import fcntl

    from kctl.spark.load import LOCK_FILE, LoadError, LoadPlan, PartitionLoad, run_load

    nothing_new = LoadPlan(tmp_path, 2, (PartitionLoad("t", 0, 5, 5),), {TopicPartition("t", 0): 5})
    dead = tmp_path / "_staging-run-000002"
    dead.mkdir()
    with (tmp_path / LOCK_FILE).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running load holds it
        with pytest.raises(LoadError, match="another kctl spark load is running"):
            run_load(None, nothing_new, "127.0.0.1:9", {})
        assert dead.exists()
    summary = run_load(None, nothing_new, "127.0.0.1:9", {})  # needs no Spark: nothing to load
    assert summary.run is None and not dead.exists()
